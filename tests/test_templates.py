"""Matmul templates (passes/mm_templates.py, codegen/template.py) end to end on CPU tensors
through Triton's interpreter (tl.dot runs there), against eager: epilogues (bias, activation,
residual add, cast) and prologues (casts, transposes) fused, mm, addmm and bmm, training."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from mind.options import PIPELINE

pytestmark = pytest.mark.usefixtures("isolated_runtime")

TEMPLATES = PIPELINE.replace("mm-templates", "mm-templates{select=template}")


def run(fn, *args, pipeline: str = TEMPLATES):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fallback to eager fails the test
        return torch.compile(fn, backend="mind", options={"pipeline": pipeline})(*args)


def kernels(tmp_path) -> str:
    return "".join(p.read_text() for p in sorted(tmp_path.glob("*.triton")))


def test_linear_gelu_residual_is_one_template_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    def fn(x, w, b, r):
        return F.gelu(x @ w + b) + r

    # k = 70 is two BLOCK_K tiles and a tail; n = 48 wraps in a 64-wide tile
    args = torch.randn(100, 70), torch.randn(70, 48), torch.randn(48), torch.randn(100, 48)
    torch.testing.assert_close(run(fn, *args), fn(*args), rtol=1e-4, atol=1e-4)
    text = kernels(tmp_path)
    assert text.count("triton.kernel @") == 1 and "triton.dot" in text
    assert "triton.extern" not in text


def test_an_mlp_over_batched_tokens_fuses_its_activation_into_the_first_template(
    tmp_path, monkeypatch
):
    """A transformer's MLP: each Linear flattens [batch, seq, width] to a matmul of rows, and the
    GELU runs over the [batch, seq, ffn] view of the first's result. It fuses into that template
    (its loops read off the template's rows), so the MLP is two kernels."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    fc1, fc2 = torch.nn.Linear(40, 96), torch.nn.Linear(96, 40)

    def mlp(x):
        return fc2(F.gelu(fc1(x), approximate="tanh"))

    x = torch.randn(3, 20, 40)
    with torch.no_grad():
        torch.testing.assert_close(run(mlp, x), mlp(x), rtol=1e-4, atol=1e-4)
    text = kernels(tmp_path)
    assert text.count("triton.kernel @") == 2 and text.count("triton.dot") == 2
    assert "triton.tanh" in text.split("triton.kernel @")[1]


def test_addmm_bmm_and_a_transposed_operand():
    def fn(x, w, b, xb, wb, r):
        return (
            torch.addmm(b, x, w, beta=0.5, alpha=2.0),
            torch.bmm(xb, wb).relu(),
            x.t() @ r,
        )

    args = (
        torch.randn(64, 40),
        torch.randn(40, 48),
        torch.randn(48),
        torch.randn(3, 20, 30),
        torch.randn(3, 30, 17),
        torch.randn(64, 24),
    )
    for got, want in zip(run(fn, *args), fn(*args)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_bf16_cast_prologue_and_epilogue(tmp_path, monkeypatch):
    """x.to(bf16) @ w: the cast inlines into the template's loads; products of the bf16 tiles
    accumulate in f32 and round once to bf16. (Triton's interpreter casts to bf16 toward zero:
    x holds bf16 values, and the result may be 2 ulps off.)"""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    def fn(x, w):
        return x.to(torch.bfloat16) @ w

    x, w = torch.randn(64, 40).to(torch.bfloat16).float(), torch.randn(40, 48).to(torch.bfloat16)
    want = (x @ w.float()).to(torch.bfloat16)
    got = run(fn, x, w)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2**-7, atol=2**-7)
    assert "triton_helpers.dot(" in "".join(p.read_text() for p in tmp_path.glob("*.py"))


def test_training_a_linear_layer():
    """Forward and backward (whose matmuls read transposed operands) through templates."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(40, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(24, 40)
    eager = [p.grad for p in _backward(model, model, x)]
    compiled = torch.compile(model, backend="mind", options={"pipeline": TEMPLATES})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fallback to eager fails the test
        grads = [p.grad for p in _backward(model, compiled, x)]
    for got, want in zip(grads, eager):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def _backward(model, fn, x):
    model.zero_grad()
    fn(x).pow(2).sum().backward()
    return list(model.parameters())


def test_aten_stays_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x, w = torch.randn(16, 8), torch.randn(8, 4)
    torch.testing.assert_close(
        run(lambda x, w: (x @ w).relu(), x, w, pipeline=PIPELINE), (x @ w).relu()
    )
    assert "triton.extern @aten.mm.default" in kernels(tmp_path)


def test_batches_past_grid_axis_1_fold_over_axis_2(tmp_path, monkeypatch):
    """A bmm template runs a program per batch on grid axis 1, which holds 65535 (2 here): 5
    batches take axes 1 and 2 (2 x 3 programs), and the sixth program computes the last batch
    again."""
    from mind.codegen import heuristics, kernel

    for module in (heuristics, kernel):
        monkeypatch.setattr(module, "GRID_YZ_MAX", 2)
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    a, b = torch.randn(5, 20, 30), torch.randn(5, 30, 17)
    torch.testing.assert_close(run(torch.bmm, a, b), torch.bmm(a, b), rtol=1e-4, atol=1e-4)
    text = kernels(tmp_path)
    assert "grid = (1, 2, 3)" in text
    assert "triton.index(Min(4, bpid + 2*bpid_z)" in text


def test_the_k_tail_is_zero_whatever_the_prologue_computes(tmp_path, monkeypatch):
    """Past the k tail a plain operand load yields 0 as its `other`; a prologue that shifts its
    load (x + 1 is 1 where the load yields 0) is zeroed by a `where` instead."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    def fn(x, w):
        return (x + 1) @ w

    args = torch.randn(64, 70), torch.randn(70, 48)  # k = 70: two 32-wide tiles and a tail
    torch.testing.assert_close(run(fn, *args), fn(*args), rtol=1e-4, atol=1e-4)
    loop = kernels(tmp_path).split("triton.for(")[1].split("triton.yield")[0]
    # the shifted operand's where, and the plain operand's load with its other
    assert loop.count("triton.where(") == 1 and loop.count("other = 0.0") == 1, loop
