"""The backend never raises for a graph Dynamo hands over, lets Dynamo's own control-flow
exceptions through, and a fallback runs the graph torch built (so it gives eager's answer)."""

from __future__ import annotations

import math
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mind.passes import run_pipeline
from mind.target.triton import emit
from programs import no_fallback
from torch._dynamo.utils import counters

import mind
from mind import MindFallbackWarning, backend
from mind.fallback import DYNAMO_CONTROL_FLOW
from mind.options import PIPELINE

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def fallbacks(compiled, *inputs) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(*inputs)
    return out, [str(w.message) for w in caught if issubclass(w.category, MindFallbackWarning)]


def test_control_flow_exceptions_are_dynamo_bases():
    names = {cls.__name__ for cls in DYNAMO_CONTROL_FLOW}
    assert names == {"RestartAnalysis", "SkipFrame"}
    assert issubclass(torch._dynamo.exc.TensorifyScalarRestartAnalysis, DYNAMO_CONTROL_FLOW)


FLOAT_ARGUMENT = {
    "clamp_min": lambda x, s: x.clamp(min=s),
    "pow": lambda x, s: x.pow(s),
    "leaky_relu": lambda x, s: F.leaky_relu(x, s),
    "add_alpha": lambda x, s: torch.add(x, x, alpha=s),
    "where": lambda x, s: torch.where(x > 1, x, s),
}


@pytest.mark.parametrize("name", FLOAT_ARGUMENT)
def test_a_new_python_float_restarts_dynamo_instead_of_falling_back(name):
    """The second call with another float makes Dynamo restart with the float as a tensor input
    (TensorifyScalarRestartAnalysis, raised inside AOTAutograd): caught, it left the graph eager."""
    fn = FLOAT_ARGUMENT[name]
    compiled = torch.compile(fn, backend="mind")
    x = torch.rand(4, 4) + 0.5
    with no_fallback():
        for s in (0.5, 0.75, 1.25):
            torch.testing.assert_close(compiled(x, s), fn(x, s))


@pytest.mark.parametrize(
    "fn",
    [lambda x, s: x / s + torch.full_like(x, s), lambda x, s: x**s + s**2],
    ids=["full_like", "pow"],
)
def test_a_float_burned_into_a_graph_is_not_served_to_another_float(fn):
    """AOTAutograd's tensorify pass makes the float a constant where an op takes no tensor for
    it: its cache entry, keyed by a graph alike for every float, served 6.0's graph to 9.0
    (Inductor too, on torch 2.14). mind's graphs that hold a float are not stored."""
    compiled = torch.compile(fn, backend="mind")
    x = torch.rand(4) + 0.5
    with no_fallback():
        for s in (4.0, 6.0, 9.0, 6.0):
            torch.testing.assert_close(compiled(x, s), fn(x, s))


def test_tanh_gelu_under_dynamic_shapes_compiles():
    fn = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    compiled = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for n in (5, 17, 33):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), fn(x))


def test_fallback_after_a_first_call_failure_runs_aotautograds_graph(monkeypatch):
    """The generated code fails at its first call: from then on the graph AOTAutograd built runs,
    with eager's answer (the eager rebuild from IR text raised TypeError on `nonzero`)."""
    real = backend.load_program

    def failing(graph, dump, pipeline, interpret):
        _, key = real(graph, dump, pipeline, interpret)

        def call(args):
            raise RuntimeError("first call failed on purpose")

        return call, key

    monkeypatch.setattr(backend, "load_program", failing)
    fn = lambda x: torch.nonzero(x > 0).sum()  # noqa: E731
    warned = []
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(fn, backend="mind")
        for _ in range(2):
            x = torch.randn(4, 4)
            out, warnings_ = fallbacks(compiled, x)
            torch.testing.assert_close(out, fn(x))
            warned += warnings_
    assert len(warned) == 1 and "on purpose" in warned[0]


def test_data_dependent_sizes_are_bound_from_the_op_that_makes_them():
    """`nonzero`'s row count and `item()` are sizes only running the graph gives (Inductor's
    unbacked symbols, `u0`): the wrapper binds each from the ATen result that defines it, and
    Dynamo's runtime asserts on it (`operator.ge(u0, 0)`) run as Python."""
    programs = {
        "nonzero": (lambda x: torch.nonzero(x > 0).sum(), lambda i: torch.randn(4, 4) * (i - 1)),
        "item": (lambda x: torch.ones(x.sum().item() + 1) * 2, lambda i: torch.full((2,), i)),
    }
    config = {"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True}
    for fn, make in programs.values():
        torch._dynamo.reset()
        with torch._dynamo.config.patch(**config), no_fallback():
            compiled = torch.compile(fn, backend="mind")
            for i in range(3):  # i = 1: nonzero finds no row
                x = make(i)
                torch.testing.assert_close(compiled(x), fn(x))
        with torch._dynamo.config.patch(**config):
            aten = mind.capture(fn, make(2), stage="aten")
        call = emit(run_pipeline(aten, PIPELINE)).split("def call(args):")[1]
        assert re.search(r"\n    u0 = \w+(\.size\(0\))?\n", call), call


def chunk_silu(x):
    a, b = x.chunk(2, -1)
    return F.silu(a) * b


def first_half(x):
    return x[:, : x.shape[1] // 2] * 2


@pytest.mark.parametrize("fn", [chunk_silu, first_half], ids=lambda f: f.__name__)
def test_fallback_of_a_symbolic_graph_gives_eagers_answer(fn, monkeypatch):
    """Generation fails on purpose: the graph binds size arithmetic (`operator.floordiv`), which
    the rebuild from text bound through `getitem`."""

    def broken(graph, dump, *passes):
        raise RuntimeError("generation failed on purpose")

    monkeypatch.setattr(backend, "generate", broken)
    compiled = torch.compile(fn, backend="mind", dynamic=True)
    warned = []
    for cols in (8, 12):
        x = torch.randn(3, cols)
        out, warnings_ = fallbacks(compiled, x)
        torch.testing.assert_close(out, fn(x))
        warned += warnings_
    assert len(warned) == 1 and "on purpose" in warned[0]


def test_failure_in_a_backward_graph_falls_back_inside_backward(monkeypatch):
    """A backward graph that fails to compile runs eagerly, the forward as compiled."""
    real = backend.generate

    def fail_backward(graph, dump, *passes):
        if graph.symbol.endswith("_backward"):
            raise RuntimeError("backward generation failed on purpose")
        return real(graph, dump, *passes)

    monkeypatch.setattr(backend, "generate", fail_backward)
    w = torch.randn(6, requires_grad=True)
    ref = w.detach().clone().requires_grad_()
    fn = lambda w: (w.sin() * 2).sum()  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(fn, backend="mind")(w).backward()
    fn(ref).backward()
    torch.testing.assert_close(w.grad, ref.grad)
    assert any("on purpose" in str(c.message) for c in caught)


def dynamic_inputs(case, step: int) -> tuple[torch.Tensor, ...]:
    """The case's small inputs with every size grown by `2 * step`: sizes equal across inputs stay
    equal (a matmul's K, a transpose), even sizes stay even (a chunk in two)."""
    return tuple(
        (torch.randn([s + 2 * step for s in i.small]) * i.scale).to(i.dtype) for i in case.inputs
    )


def test_benchmark_patterns_compile_once_under_dynamic_shapes_and_serve_three_sizes():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is a folder
    from benchmarks.cases import CASES

    for case in CASES:
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(case.fn, backend="mind", dynamic=True)
        with no_fallback():
            for step in range(3):
                inputs = dynamic_inputs(case, step)
                want = case.fn(*inputs)
                torch.testing.assert_close(compiled(*inputs), want, rtol=2e-2, atol=2e-2)
        assert counters["stats"]["unique_graphs"] == 1, case.name


def test_an_aten_call_with_a_tensor_keyword_compiles():
    """SDPA's `attn_mask` is a keyword of the ATen call: realize must make it a buffer (GPT-2
    and Llama from transformers fell back on CPU)."""

    def attention(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.where(m, 0.0, -math.inf))

    q, k, v = (torch.randn(2, 2, 8, 16) for _ in range(3))
    m = torch.rand(2, 1, 8, 8) > 0.3
    m[..., 0] = True
    with no_fallback():
        got = torch.compile(attention, backend="mind")(q, k, v, m)
    torch.testing.assert_close(got, attention(q, k, v, m))


def test_an_aten_call_with_a_view_as_a_tensor_keyword_compiles():
    """A mask that is a view of a computed tensor (timm's BEiT: a relative position bias,
    gathered, permuted, copied, unsqueezed) is passed as its buffer reinterpreted; the graph
    fell back, the call left reading the view."""

    def attention(q, table, index):
        bias = table[index.view(-1)].view(5, 5, 2).permute(2, 0, 1).contiguous()
        return F.scaled_dot_product_attention(q, q, q, attn_mask=bias.unsqueeze(0))

    q, table, index = torch.randn(3, 2, 5, 8), torch.randn(9, 2), torch.randint(0, 9, (5, 5))
    with no_fallback():
        got = torch.compile(attention, backend="mind")(q, table, index)
    torch.testing.assert_close(got, attention(q, table, index))


def test_a_cat_with_a_piece_empty_along_its_dim_compiles():
    """A partial rotary whose rotary part covers the whole head (transformers' Phi-3) joins an
    empty pass-through: that piece joins nothing. The graph fell back, its cat lowered to a
    `where` with no condition."""

    def rotate(q, cos, sin):
        rot, rest = q[..., :8], q[..., 8:]
        halves = torch.cat((-rot[..., 4:], rot[..., :4]), dim=-1)
        return torch.cat((rot * cos + halves * sin, rest), dim=-1)

    q, cos, sin = torch.randn(2, 3, 5, 8), torch.randn(5, 8), torch.randn(5, 8)
    with no_fallback():
        got = torch.compile(rotate, backend="mind")(q, cos, sin)
    torch.testing.assert_close(got, rotate(q, cos, sin))


def test_a_coordinate_grid_read_at_gathered_positions_compiles():
    """RAFT's coordinate grid (an arange, expanded, concatenated, viewed) read at a gathered
    index: its element is the gathered position plus an offset, computed in the body. The graph
    fell back: 'cannot inline loops.index(_ind0 + 16*p0) at an indirect index'."""

    def gather_grid(idx):
        ys, xs = torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij")
        grid = torch.cat([xs, ys]).view(2, 16, 16).float()
        return grid[:, idx] * 2

    idx = torch.tensor([3, 0, 15, 7])
    with no_fallback():
        got = torch.compile(gather_grid, backend="mind")(idx)
    torch.testing.assert_close(got, gather_grid(idx))


EMBEDDING_BAGS = {
    "sum": {"mode": "sum"},
    "mean": {"mode": "mean"},
    "max": {"mode": "max"},
    "weighted": {"mode": "sum", "per_sample_weights": torch.rand(8)},
    "padding": {"mode": "mean", "padding_idx": 4},
    "last_offset": {"mode": "sum", "include_last_offset": True},  # offsets end at 8: 2 bags
}


@pytest.mark.parametrize("name", EMBEDDING_BAGS)
def test_embedding_bag_compiles_forward_and_backward(name):
    """An ATen call, as in Inductor. It fell back: torch's meta function of
    `_embedding_bag_forward_only` depends on the device (a CPU bag leaves offset2bag empty), and
    the verifier ran it on device-less meta tensors."""
    kwargs = EMBEDDING_BAGS[name]
    fn = lambda w, i, o: F.embedding_bag(i, w, o, **kwargs) * 2  # noqa: E731
    w = torch.randn(10, 4, requires_grad=True)
    ref = w.detach().clone().requires_grad_()
    i, o = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4, 8])
    with no_fallback():
        got = torch.compile(fn, backend="mind")(w, i, o)
        want = fn(ref, i, o)
        torch.testing.assert_close(got, want)
        got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(w.grad, ref.grad)
