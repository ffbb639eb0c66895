"""A fast slice of the OpInfo sweep (`python3 -m benchmarks.opinfo`): a dozen representative ops
from torch's own database, one sample each, compiled by mind and compared with eager."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is a plain folder

from benchmarks.opinfo import (  # noqa: E402
    Draw,
    category,
    check_op,
    closer_to_float64,
    merged,
    op_names,
)

pytestmark = pytest.mark.usefixtures("isolated_runtime")

#: op -> the bucket it must land in: "own kernels" (mind generated a Triton kernel) or any
#: passing bucket (None: ATen calls are fine, as for topk, which Inductor leaves to ATen too)
OPS = {
    "abs": "own kernels",
    "add": "own kernels",
    "where": "own kernels",
    "sum": "own kernels",
    "amax": "own kernels",
    "argmax": "own kernels",
    "mean": "own kernels",
    "softmax": "own kernels",
    "nn.functional.layer_norm": "own kernels",
    "cat": "own kernels",
    "index_select": "own kernels",
    "scatter_add": "own kernels",
    "index_put": "own kernels",
    "heaviside": "own kernels",
    "logaddexp": "own kernels",
    "atan2": "own kernels",  # the interpreted math helpers (tl has no atan, lgamma)
    "mvlgamma.mvlgamma_p_3": "own kernels",
    "cumsum": "own kernels",
    "sort": None,  # its first sample sorts 8000 elements: ATen's, as in Inductor
    "topk": None,
    "masked.cumsum": None,  # a tensor constant made while AOTAutograd traces (fake mode)
    "nn.functional.linear_cross_entropy.chunked": None,  # an extern call to torch.ops.higher_order
}


@pytest.mark.parametrize("op", OPS)
def test_op_matches_eager(op):
    if op not in op_names():  # torch 2.11's database lacks the newest ops
        pytest.skip(f"this torch's op_db has no '{op}'")
    row = check_op(op, "cpu", ("mind",))
    assert row.eager in ("ok", "random"), row
    cell = row.cells["mind"]
    bucket = category(vars(cell))
    assert cell.status == "pass" and not cell.fallbacks, (cell.message, cell.fallbacks)
    if OPS[op]:
        assert bucket == OPS[op], vars(cell)


def test_a_sweep_of_some_ops_updates_their_rows():
    earlier = [{"op": "abs", "v": 1}, {"op": "cumsum", "v": 1}, {"op": "sort", "v": 1}]
    rows = [{"op": "sort", "v": 2}, {"op": "cumsum", "v": 2}, {"op": "new", "v": 2}]
    assert merged(earlier, rows) == [
        {"op": "abs", "v": 1},
        {"op": "cumsum", "v": 2},
        {"op": "sort", "v": 2},
        {"op": "new", "v": 2},
    ]


@pytest.mark.parametrize("op", ["sum", "softmax", "cumsum"])
def test_another_sample_in_another_dtype_matches_eager(op):
    """`--dtype` and `--sample` draw inputs the default sweep never shows mind."""
    row = check_op(op, "cpu", ("mind",), Draw("bfloat16", 1))
    assert row.dtype == "bfloat16" and row.eager in ("ok", "random"), row
    cell = row.cells["mind"]
    assert cell.status == "pass" and not cell.fallbacks, (cell.message, cell.fallbacks)
    assert category(vars(cell)) == "own kernels"


@pytest.mark.parametrize("op", ["softmax", "nn.functional.layer_norm", "cumsum"])
def test_gradients_through_the_compiled_backward_match_eager(op):
    """`--grad`: each input's gradient, for a random cotangent of each output (a sum's ones
    would make a softmax's gradient zero), from the backward graph mind compiled."""
    row = check_op(op, "cpu", ("mind",), Draw(grad=True))
    assert row.eager == "ok", row
    cell = row.cells["mind"]
    assert cell.status == "pass" and not cell.fallbacks, (cell.message, cell.fallbacks)
    assert cell.graphs == 1 and cell.kernels >= 2  # the forward's kernels, and the backward's


@pytest.mark.parametrize("op", ["softmax", "as_strided_scatter"])
def test_dynamic_sizes_compile_one_symbolic_graph_that_matches_eager(op):
    """`--dynamic`: `dynamic=True` makes every size a symbol, and the sample's int keywords too
    (as_strided_scatter's storage offset)."""
    row = check_op(op, "cpu", ("mind",), Draw(dynamic=True))
    assert row.eager == "ok", row
    cell = row.cells["mind"]
    assert cell.status == "pass" and not cell.fallbacks, (cell.message, cell.fallbacks)
    assert cell.graphs == 1
    assert str(Draw(dynamic=True)) == "one sample per op, sizes dynamic"


def test_an_op_without_the_drawn_sample_is_skipped():
    assert check_op("abs", "cpu", ("mind",), Draw(sample=10_000)).eager == (
        "error: fewer than 10001 samples"
    )
    assert check_op("abs", "cpu", ("mind",), Draw("float8_e4m3fn")).eager == (
        "error: no supported dtype float8_e4m3fn"
    )
    assert check_op("abs", "cpu", ("mind",), Draw("int32", grad=True)).eager == (
        "error: no gradients"
    )


def test_a_result_that_differs_from_eager_passes_only_closer_to_float64():
    """Eager's low-precision kernels round too (its CPU grid sampler in bfloat16 is 40 times as
    far from float64 as mind's): a result that differs from eager's passes where it is closer to
    the op run in float64, for every output."""
    x = torch.linspace(-3, 3, 64, dtype=torch.bfloat16)

    def fn(t):
        return t.exp(), t * 3

    exact = [r.to(torch.bfloat16) for r in fn(x.double())]
    off = [r + 0.25 for r in exact]
    assert closer_to_float64(fn, (x,), exact, off).startswith("differs from eager, but is closer")
    assert closer_to_float64(fn, (x,), off, exact) == ""
    assert closer_to_float64(fn, (x,), [exact[0], off[1]], [off[0], exact[1]]) == ""

    def with_index(t):  # an index output must equal eager's, however close the values
        return t.exp(), t.argmax()

    values = with_index(x.double())[0].to(torch.bfloat16)
    index = torch.tensor(3)
    assert closer_to_float64(with_index, (x,), [values, index], [values + 0.25, index]) != ""
    assert closer_to_float64(with_index, (x,), [values, index + 1], [values + 0.25, index]) == ""
    assert closer_to_float64(fn, (x,), off, off) == ""  # as far: a tie says nothing
    nan = [r.clone().fill_(float("nan")) for r in exact]
    assert closer_to_float64(fn, (x,), nan, nan) == ""
    # eager's NaN where float64 is finite (its float16 exp overflowed): mind's finite result is
    # closer; mind's NaN never is
    assert closer_to_float64(fn, (x,), exact, nan).startswith("differs from eager, but is closer")
    assert closer_to_float64(fn, (x,), nan, exact) == ""


def test_the_float64_reference_of_a_gradient_takes_the_low_precision_run_s_cotangent():
    """With gradients, the float64 run that judges a bf16 result takes the bf16 run's cotangent,
    rounded as it was: unrounded, kron's bf16 gradient (200 products cancelling to -0.81) had a
    reference of -0.69, and mind's exact -0.81 looked farther from it than eager's -0.65."""
    x = torch.linspace(-3, 3, 64, dtype=torch.bfloat16).requires_grad_()

    def fn(t):
        return t * 2

    draw = Draw(dtype="bfloat16", grad=True)
    low = draw.run(fn, (x,))
    wide = x.detach().double().requires_grad_()
    exact = draw.run(fn, (wide,), low[0])[1][0]
    assert torch.equal(exact, low[1][0].double())  # twice a bf16 cotangent: exact in both
    assert not torch.equal(draw.run(fn, (wide,))[1][0], exact)  # an unrounded cotangent
    got = [low[0], low[1][0]]
    eager = [low[0], low[1][0] + 0.25]
    assert closer_to_float64(fn, (x,), (got[0], (got[1],)), (eager[0], (eager[1],)), draw) != ""
