"""How the triton dialect's scan and sort ops read as Python: `tl.associative_scan` with the scan
kind's combine function, and the `triton_helpers` the combine, the carry and the sort call
(mind/runtime/triton_helpers/reductions.py)."""

from __future__ import annotations

from collections.abc import Callable

from mind.dialects.scans import SCANS
from mind.ir.core import Operation

Names = Callable[..., str]


def _scan(op: Operation, n: Names) -> str:
    values = "".join(f"{n(v)}, " for v in op.values).rstrip()
    fn = SCANS[op.scan_type].combine
    return f"tl.associative_scan(({values}), {op.axis}, triton_helpers.{fn})"


def _combine(op: Operation, n: Names) -> str:
    fn = SCANS[op.scan_type].combine
    return f"triton_helpers.{fn}({', '.join(n(v) for v in op.values)})"


def _last(op: Operation, n: Names) -> str:
    return f"triton_helpers.last({n(op.value)}, {op.axis})"


def _sort(op: Operation, n: Names) -> str:
    numel = n(op.numel) if op.numel is not None else "None"
    return (
        f"triton_helpers.sort_with_index({n(op.value)}, {n(op.index)}, {numel}, "
        f"descending={op.descending})"
    )


#: op name -> the right-hand side of its line
KERNEL_OPS: dict[str, Callable[[Operation, Names], str]] = {
    "triton.scan": _scan,
    "triton.combine": _combine,
    "triton.last": _last,
    "triton.sort": _sort,
}
#: ops whose Python gives a tuple, even of one value: their targets end with a comma
TUPLES = {"triton.scan"}
