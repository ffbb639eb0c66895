"""Views passed to ATen calls and returned as outputs are their buffers reinterpreted (no copy
kernel): the lit inputs' pass outputs re-parse identically and compute what their inputs did,
and compiled functions give eager's values and strides with no kernel for the views."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mind.analysis.views import view_layout
from mind.interpreters.loops import evaluate
from mind.ir.printer import print_module
from mind.ir.types import TensorType
from mind.passes import run_pipeline
from mind.tools.split import split_input
from torch.testing import assert_close

import mind
from mind.backend import MindFallbackWarning

ROOT = Path(__file__).resolve().parent.parent
#: lit inputs and the pipelines to check on them
LIT = {
    "realize/reinterpret.loops": ("realize", "realize,inline", "realize,inline,schedule"),
    "schedule/reinterpret.loops": ("schedule", "schedule,to-triton"),
    "triton/reinterpret.scheduled": ("to-triton",),
}
CHUNKS = [
    pytest.param(chunk, pipelines, id=f"{name}#{i}")
    for name, pipelines in LIT.items()
    for i, (chunk, _) in enumerate(split_input((ROOT / "lit_tests" / name).read_text()))
]


def run(text: str, pipeline: str) -> str:
    return print_module(run_pipeline(mind.parse(text), pipeline))


def inputs_for(graph) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for arg in graph.body.args:
        t = arg.type
        assert isinstance(t, TensorType)
        data = torch.randn([int(s) for s in t.shape], generator=gen)
        out.append(data.as_strided(data.shape, [int(s) for s in t.strides]).copy_(data))
    return out


@pytest.mark.parametrize(("text", "pipelines"), CHUNKS)
def test_outputs_reparse_identically(text, pipelines):
    for pipeline in pipelines:
        out = run(text, pipeline)
        assert print_module(mind.parse(out)) == out


@pytest.mark.parametrize(("text", "pipelines"), [c for c in CHUNKS if c.id.startswith("realize")])
def test_realized_graphs_compute_the_same(text, pipelines):
    before = mind.parse(text)
    after = run_pipeline(mind.parse(text), "realize")
    inlined = run_pipeline(mind.parse(text), "realize,inline")
    for g0, g1, g2 in zip(before.ops, after.ops, inlined.ops, strict=True):
        xs = inputs_for(g0)
        want = evaluate(g0, xs)
        for got in (evaluate(g1, xs), evaluate(g2, xs)):
            for x, y in zip(want, got, strict=True):
                assert_close(y, x, rtol=1e-6, atol=1e-6)


def test_view_layout_rejects_non_affine_views():
    text = """loops.graph @g(%arg0_1: f32[4, 8][8, 1]cpu) {
      %v = loops.view(%arg0_1, [Mod(p0, 4), floor(p0/4)]) : f32[32]cpu
      %t = loops.view(%arg0_1, [p1, p0 + 1]) : f32[7, 4]cpu
      loops.output(%v, %t)
    }"""
    graph = mind.parse(text).ops[0]
    v, t = (op.result for op in graph.body.ops[:2])
    assert view_layout(v, (8, 1)) is None
    layout = view_layout(t, (8, 1))
    assert (layout.base, layout.strides, layout.offset) == (graph.body.args[0], (1, 8), 1)


@pytest.mark.parametrize(
    "flat, shape",
    [("s0*(p0 + 1) + p1", ("s0", "s0")), ("2*(p1 + 3*p0) + 4", (4, 3)), ("8*p0 + p1", (1, 8)),
     ("s0*p1 + s1*(p0 + 2)", (4, "s1")), ("Mod(p0, 4) + p1", (8, 2)), ("p0*p1", (2, 2))],
)  # fmt: skip
def test_an_affine_view_reads_off_as_its_expanded_form_does(flat, shape):
    """A flat index as it comes (a sum of terms, read off term by term, or not expanded, taken
    through sympy's calculus) gives the layout its expansion gives."""
    import sympy
    from mind.analysis.views import _affine
    from mind.ir.symbols import sym

    names = {n: sym(n) for n in ("p0", "p1", "s0", "s1")}
    expr = sympy.sympify(flat, locals=names)
    dims = tuple(names[n] if isinstance(n, str) else n for n in shape)
    assert _affine(expr, dims) == _affine(sympy.expand(expr), dims)
    assert (_affine(expr, dims) is None) == (flat in ("Mod(p0, 4) + p1", "p0*p1"))


def compiled(fn, tmp_path: Path, *args):
    """`fn` compiled by mind (no fallback allowed) on `args`, and the kernels it launched."""
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MindFallbackWarning)
        out = torch.compile(fn, backend="mind")(*args)
    ops = [op for p in tmp_path.glob("*.triton") for op in mind.parse(p.read_text()).ops]
    wrapper_ops = [o.name for op in ops if op.name == "triton.wrapper" for o in op.body.ops]
    return out, [op for op in ops if op.name == "triton.kernel"], wrapper_ops


def test_linear_takes_the_weight_reinterpreted(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    out, kernels, wrapper = compiled(F.linear, tmp_path, x, w, b)
    assert_close(out, F.linear(x, w, b))
    assert kernels == []
    assert wrapper.count("triton.reinterpret") == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.t(),
        lambda x: x[:, 1:3],
        lambda x: (x[2], x[:1].expand(3, 8), x.unsqueeze(1)),
        lambda x: ((x + 1).t(), x * 2),
    ],
    ids=["t", "slice", "select_expand_unsqueeze", "node_t"],
)
def test_returned_views_have_eager_values_and_strides(fn, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = torch.randn(4, 8)
    out, kernels, wrapper = compiled(fn, tmp_path, x)
    want = fn(x)
    outs, wants = (out, want) if isinstance(want, tuple) else ((out,), (want,))
    for got, expected in zip(outs, wants, strict=True):
        assert_close(got, expected, rtol=0, atol=0)
        assert got.stride() == expected.stride()
    assert len(kernels) == sum(1 for e in wants if e._base is None)  # views need no kernel
    assert "triton.reinterpret" in wrapper


def test_mm_of_transposed_intermediate(tmp_path, monkeypatch):
    """The buffer under the alias is written before the mm reads it and not reused meanwhile."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x, y = torch.randn(8, 4), torch.randn(8, 6)

    def fn(x, y):
        a = (x + 1).t()
        return a @ y, (y * 2).neg()

    out, kernels, wrapper = compiled(fn, tmp_path, x, y)
    for got, want in zip(out, fn(x, y), strict=True):
        assert_close(got, want)
    assert "triton.reinterpret" in wrapper
