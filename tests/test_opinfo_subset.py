"""A fast slice of the OpInfo sweep (`python3 -m benchmarks.opinfo`): a dozen representative ops
from torch's own database, one sample each, compiled by mind and compared with eager."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is a plain folder

from benchmarks.opinfo import category, check_op, merged, op_names  # noqa: E402

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
