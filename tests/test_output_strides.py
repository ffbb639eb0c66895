"""Graph outputs and ATen call arguments have exactly the strides of the aten graph's values:
`lower` lists them (`strides` on `loops.output`, `input_strides` on calls), `realize` lays them
out that way, and compiled functions return tensors strided like eager's (a backward graph
asserts the strides of what the forward saved)."""

from __future__ import annotations

import pytest
import torch
from mind.interpreters.loops import evaluate
from mind.ir.core import Operation
from mind.ir.diagnostics import MindError
from mind.ir.printer import print_module
from mind.passes import run_pipeline
from programs import compile_strictly

import mind


def transposed(x):
    return x.t() * 2, x.t(), x.sum(), x + 1


FUNCTIONS = {
    "t_mul": lambda x: x.t() * 2,
    "t_view": lambda x: x.t(),
    "permute_3d": lambda x: (x.view(2, 4, 32) + 1).permute(2, 0, 1),
    "expand": lambda x: x[0].expand(4, 32),
    "slice_t": lambda x: x[:, 1:5].t(),
    "several": transposed,
    # ATen calls get arguments laid out as in the aten graph: their results' layouts follow them
    "topk_view": lambda x: torch.topk(x.t(), 3, 0)[0] + 1,
    "topk_node": lambda x: torch.topk(x.t() + 1, 3, 0)[0] * 2,
    # a sort of a transposed input is laid out as eager's
    "sort_t": lambda x: torch.sort(x.t(), 0),
}


def aten_output_strides(module) -> list:
    output = module.ops[0].body.terminator
    return [list(v.type.strides) if hasattr(v, "type") else None for v in output.args]


def test_lower_lists_the_aten_output_strides():
    aten = mind.capture(transposed, torch.randn(8, 32), stage="aten")
    lowered = run_pipeline(aten, "lower")
    output = lowered.ops[0].body.terminator
    assert output.attrs["strides"] == [[1, 32], [1, 32], [], [32, 1]]
    assert output.attrs["strides"] == aten_output_strides(aten)
    text = print_module(lowered)
    assert print_module(mind.parse(text)) == text


def test_lower_lists_the_call_argument_strides():
    aten = mind.capture(
        lambda x, y: torch.sort(x.t(), 0)[0] @ y,  # (a sort of 600: ATen's)
        torch.randn(8, 600),
        torch.randn(8, 2),
        stage="aten",
    )
    calls = [
        op
        for op in run_pipeline(aten, "lower").walk()
        if op.name in ("loops.extern", "loops.fallback")
    ]
    assert [op.attrs["input_strides"] for op in calls] == [[[1, 600]], [[1, 600], [2, 1]]]


def test_realize_gives_outputs_fixed_layouts():
    x = torch.randn(8, 32)
    aten = mind.capture(transposed, x, stage="aten")
    realized = run_pipeline(aten, "lower,realize,inline")
    text = print_module(realized)
    assert print_module(mind.parse(text)) == text
    assert print_module(run_pipeline(mind.parse(text), "realize,inline")) == text
    output = realized.ops[0].body.terminator
    for value, strides in zip(output.args, aten_output_strides(aten)):
        assert list(value.type.strides) == strides
        if isinstance(value.owner, Operation):
            assert "layout" not in value.owner.attrs
    got = evaluate(realized.ops[0], [x])
    for g, want in zip(got, transposed(x)):
        assert g.stride() == want.stride()
        torch.testing.assert_close(g, want, rtol=0, atol=0)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_compiled_outputs_have_eager_strides(name):
    fn, x = FUNCTIONS[name], torch.randn(8, 32)
    got = compile_strictly(fn, x)
    want = fn(x)
    for g, w in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, want))):
        assert (g.shape, g.stride()) == (w.shape, w.stride())
        torch.testing.assert_close(g, w)


def test_strides_must_match_the_outputs():
    text = """
    loops.graph @g(%arg0_1: f32[4][1]cpu) {
      loops.output(%arg0_1, %arg0_1) {strides = [[1]]}
    }"""
    with pytest.raises(MindError, match="has 2 outputs but strides for 1"):
        run_pipeline(mind.parse(text), "realize")


def test_rank_of_strides_must_match():
    text = """
    loops.graph @g(%arg0_1: f32[4][1]cpu) {
      loops.output(%arg0_1) {strides = [[4, 1]]}
    }"""
    with pytest.raises(MindError, match=r"needs '%arg0_1' \(f32\[4\]\[1\]cpu\) with strides"):
        run_pipeline(mind.parse(text), "realize")


def test_schedule_and_triton_keep_the_output_layout():
    aten = mind.capture(lambda x: x.t() * 2, torch.randn(8, 32), stage="aten")
    scheduled = print_module(run_pipeline(aten, "lower,realize,inline,schedule"))
    # the node runs its loops in the order its result lies in memory: dim 1, then dim 0
    assert "sizes = ([8, 32], [])" in scheduled
    assert "scheduled.store(%buf0, 32*p0 + p1, %2)" in scheduled
    assert "scheduled.output(%buf0)\n" in scheduled
    triton = print_module(run_pipeline(mind.parse(scheduled), "fuse,merge-loops,to-triton"))
    assert "%buf0 = triton.empty_strided((32, 8), (1, 32)) : f32[32, 8][1, 32]cpu" in triton
