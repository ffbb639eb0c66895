"""mm-epilogues (passes/mm_epilogues.py, analysis/activations.py): an addmm that only a
tanh-GELU reads runs as one `aten._addmm_activation` call, however the program spells the GELU;
anything else (a ReLU among them) keeps its addmm. End to end on CPU tensors (ATen runs the call,
Triton's interpreter the kernels), against eager."""

import copy
import math
import warnings

import pytest
import sympy
import torch
import torch.nn.functional as F
from mind.analysis.activations import ACTIVATIONS, X, same_function

pytestmark = pytest.mark.usefixtures("isolated_runtime")

FOLDED = "aten__addmm_activation_default("


def gelu_tanh(h):
    return F.gelu(h, approximate="tanh")


def gelu_new(h):
    """transformers' GPT-2 activation, written out."""
    return (
        0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
    )


def compile_and_run(tmp_path, monkeypatch, fn, *args):
    """fn compiled by mind (no fallback), its result, and the emitted Python of its graphs."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = torch.compile(fn, backend="mind")(*args)
    return got, "".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))


def linear(width: int, ffn: int, dtype=torch.bfloat16) -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(width, ffn).to(dtype)


@pytest.mark.parametrize(
    "activation",
    [
        gelu_tanh,
        gelu_new,
        lambda h: 0.5 * h * (1 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h))),
    ],
    ids=["F.gelu-tanh", "gelu_new", "gelu-tanh-by-hand"],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_gelu_only_reading_an_addmm_folds_into_it(tmp_path, monkeypatch, activation, dtype):
    """Over [batch, seq, width] tokens: the Linear's addmm works on rows, the activation on the
    3-d view of its result, which the folded call's result is, reinterpreted."""
    fc = linear(32, 48, dtype)
    x = torch.randn(2, 8, 32, dtype=dtype)
    with torch.no_grad():
        got, source = compile_and_run(tmp_path, monkeypatch, lambda x: activation(fc(x)), x)
        want = activation(fc(x).float())
    assert source.count(FOLDED) == 1 and "aten_addmm_default" not in source
    assert "use_gelu=True" in source
    assert "@triton.jit" not in source  # the activation's kernel is gone
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    "view, strides",
    [
        (lambda h: h.view(4, 4, 24), (96, 24, 1)),
        (lambda h: h.t(), (1, 24)),
        (lambda h: h.view(4, 4, 24).permute(2, 0, 1), (1, 96, 24)),
    ],
    ids=["regrouped", "transposed", "permuted"],
)
def test_a_gelu_over_a_view_of_the_call_reads_its_memory_in_place(
    tmp_path, monkeypatch, view, strides
):
    """The node's result is where the call's elements are: the call's result, reinterpreted
    with the strides eager gives the GELU of the view."""
    torch.manual_seed(0)
    args = [torch.randn(*s, dtype=torch.bfloat16) for s in ((24,), (16, 32), (32, 24))]
    fn = lambda b, x, w: gelu_tanh(view(torch.addmm(b, x, w)))  # noqa: E731
    got, source = compile_and_run(tmp_path, monkeypatch, fn, *args)
    assert source.count(FOLDED) == 1 and got.stride() == fn(*args).stride() == strides
    want = fn(*(a.float() for a in args))
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


def test_a_gelu_of_part_of_the_call_keeps_the_addmm(tmp_path, monkeypatch):
    args = [torch.randn(*s, dtype=torch.bfloat16) for s in ((24,), (16, 32), (32, 24))]
    fn = lambda b, x, w: gelu_tanh(torch.addmm(b, x, w)[:, :10])  # noqa: E731
    got, source = compile_and_run(tmp_path, monkeypatch, fn, *args)
    assert FOLDED not in source
    torch.testing.assert_close(got, fn(*args), rtol=0, atol=0)


def test_symbolic_sizes_fold_too(tmp_path, monkeypatch):
    """Under dynamic=True the token count is a symbol; one call serves every count."""
    fc = linear(32, 48)
    reference = copy.deepcopy(fc).float()
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compiled = torch.compile(lambda x: gelu_tanh(fc(x)), backend="mind", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for tokens in (5, 9):
            x = torch.randn(2, tokens, 32, dtype=torch.bfloat16)
            want = gelu_tanh(reference(x.float()))
            torch.testing.assert_close(compiled(x).float(), want, rtol=2e-2, atol=2e-2)
    source = "".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))
    assert source.count(FOLDED) == 1 and "aten_addmm_default" not in source


def test_an_mlp_under_symbolic_sizes_folds_its_first_projection(tmp_path, monkeypatch):
    """fc2(gelu(fc1(x))) over [2, tokens, width] with tokens a symbol: the GELU node, realized
    as fc2's [2 * tokens, ffn] rows, reads fc1's rows through the [2, tokens, ffn] view, an
    index of floors and Mods by the symbol that is its own offset only by the loop ranges."""
    fc1, fc2 = linear(32, 48), linear(48, 32)
    mlp = lambda x: fc2(gelu_tanh(fc1(x)))  # noqa: E731
    reference = lambda x: F.linear(  # noqa: E731
        gelu_tanh(F.linear(x, fc1.weight.float(), fc1.bias.float())),
        fc2.weight.float(),
        fc2.bias.float(),
    )
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compiled = torch.compile(mlp, backend="mind", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for tokens in (5, 9):
            x = torch.randn(2, tokens, 32, dtype=torch.bfloat16)
            torch.testing.assert_close(
                compiled(x).float(), reference(x.float()), rtol=3e-2, atol=3e-2
            )
    source = "".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))
    assert source.count(FOLDED) == 1 and source.count("aten_addmm_default(") == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda h: F.gelu(h),  # erf-GELU: cuBLASLt's epilogue computes tanh-GELU
        lambda h: gelu_tanh(h) + 1.0,
        lambda h: torch.clamp(gelu_new(h), max=0.5),
        torch.relu,  # cuBLASLt's ReLU epilogue turns a NaN into 0
        lambda h: h.clamp_min(0),
        lambda h: (h, gelu_tanh(h)),  # the addmm is read twice
        lambda h: gelu_tanh(h) * h.sum(),
    ],
    ids=[
        "erf-gelu",
        "gelu-plus-one",
        "clamped-gelu",
        "relu",
        "clamp_min",
        "returned-too",
        "read-by-a-sum",
    ],
)
def test_anything_else_keeps_its_addmm(tmp_path, monkeypatch, fn):
    fc = linear(32, 48)
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        got, source = compile_and_run(tmp_path, monkeypatch, lambda x: fn(fc(x)), x)
        want = fn(fc(x))
    assert FOLDED not in source and "aten_addmm_default(" in source
    for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
        torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize(
    "dtype, kwargs",
    [(torch.float32, {}), (torch.bfloat16, {"beta": 0.5}), (torch.bfloat16, {"alpha": 2.0})],
    ids=["f32", "beta", "alpha"],
)
def test_an_addmm_outside_the_epilogue_path_keeps_its_gelu(tmp_path, monkeypatch, dtype, kwargs):
    """f32, or a scaled product or bias: cuBLASLt's epilogue path takes none of them."""
    torch.manual_seed(0)
    b, x, w = (
        torch.randn(24, dtype=dtype),
        torch.randn(16, 32, dtype=dtype),
        torch.randn(32, 24, dtype=dtype),
    )
    fn = lambda b, x, w: gelu_tanh(torch.addmm(b, x, w, **kwargs))  # noqa: E731
    got, source = compile_and_run(tmp_path, monkeypatch, fn, b, x, w)
    assert FOLDED not in source
    torch.testing.assert_close(got.float(), fn(b, x, w).float(), rtol=2e-2, atol=5e-2)


def test_a_training_step_keeps_the_addmm_its_backward_reads(tmp_path, monkeypatch):
    """The forward saves the addmm for the GELU's backward: two readers, nothing folds."""
    fc = linear(32, 48)
    x = torch.randn(16, 32, dtype=torch.bfloat16, requires_grad=True)
    step = lambda x: gelu_new(fc(x)).float().square().sum()  # noqa: E731
    loss, source = compile_and_run(tmp_path, monkeypatch, step, x)
    loss.backward()
    got = (x.grad.clone(), fc.weight.grad.clone())
    x.grad, fc.weight.grad = None, None
    step(x).backward()
    assert FOLDED not in source
    for g, w in zip(got, (x.grad, fc.weight.grad)):
        torch.testing.assert_close(g.float(), w.float(), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize(
    "expr, same",
    [
        # sqrt(2 / pi) as another program rounds it, or as BLOOM writes it (8 digits): the same
        # function to f16's precision
        (0.5 * X * (1 + sympy.tanh(0.7978845608028655 * X + 0.0356774081363001 * X**3)), True),
        (X * (0.5 + 0.5 * sympy.tanh(0.7978845608028654 * (X + 0.044715 * X * X * X))), True),
        (X * 0.5 * (1 + sympy.tanh(0.79788456 * X * (1 + 0.044715 * X * X))), True),
        # a constant off by 1e-5 is another function
        (0.5 * X * (1 + sympy.tanh(0.79789258 * X + 0.0356774081363001 * X**3)), False),
        (0.5 * X * (1 + sympy.erf(0.7071067811865476 * X)), False),
    ],
)
def test_tanh_gelu_is_recognized_by_its_function_not_its_spelling(expr, same):
    assert same_function(expr, ACTIVATIONS["gelu_tanh"]) is same
