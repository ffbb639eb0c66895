"""Scan kinds: one table, one row per kind, read by the lowering (what a body yields), the
verifiers (kinds and dtypes), the evaluators (the torch reference), the kernel builder (the
accumulator dtype, a looped kernel's starting carry) and the Triton emitter (the function that
`tl.associative_scan` combines with).

A scan keeps the dim it runs along: element i is the fold of elements 0..i (torch's cumsum,
cumprod, logcumsumexp, cummax, cummin). Plain kinds fold values; index kinds (argmax, argmin:
cummax's and cummin's indices) fold (value, position) pairs and give the position, the latest
one on ties and NaN as the largest value, as eager does. Sorting keeps its dim too, but folds
nothing: `loops.sort` and `scheduled.sort` (dialects/loops.py, scheduled.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.ir import dtypes as dt
from mind.ir.dtypes import DType

from .reductions import neutral_value


@dataclass(frozen=True)
class Scan:
    name: str
    #: the `triton_helpers` function combining an earlier part's value(s) with a later part's:
    #: `f(a, b)`, or `f(a_value, a_index, b_value, b_index)` for index kinds
    combine: str
    #: the value that leaves a fold unchanged ("zero", "one", "lowest", "highest"): where a
    #: looped kernel's carry starts
    neutral_of: str
    #: the torch function scanning a dim (the evaluator's reference); index kinds take the
    #: indices of its result, max and min its values
    torch: str
    #: "plain" or "index" (yields the value, gives the position: i64)
    family: str = "plain"

    @property
    def is_index(self) -> bool:
        return self.family == "index"

    @property
    def arity(self) -> int:
        """How many values the combine folds: a value, or a (value, position) pair."""
        return 2 if self.is_index else 1

    def yield_dtype(self, result: DType) -> DType | None:
        """What a loops scan body yields for a result of `result` dtype: the value as is (None:
        any dtype) for index kinds, the result dtype otherwise."""
        return None if self.is_index else result

    def neutral(self, dtype: DType) -> float | int | bool:
        return neutral_value(self.neutral_of, dtype)


def fold_dtype(value: DType) -> DType:
    """The dtype a kernel scans or sorts `value`s in: f16/bf16 in f32 (eager's accumulator type;
    and Triton's interpreter compares bf16 wrongly), b8 as i8 (bits to move, compare and add)."""
    return dt.i8 if value == dt.b8 else dt.upcast(value)


SCANS: dict[str, Scan] = {
    s.name: s
    for s in (
        Scan("sum", "add", "zero", "cumsum"),
        Scan("prod", "mul", "one", "cumprod"),
        Scan("logsumexp", "logaddexp", "lowest", "logcumsumexp"),
        Scan("max", "maximum", "lowest", "cummax"),
        Scan("min", "minimum", "highest", "cummin"),
        Scan("argmax", "maximum_with_later_index", "lowest", "cummax", family="index"),
        Scan("argmin", "minimum_with_later_index", "highest", "cummin", family="index"),
    )
}

#: every kind's name, in table order
SCAN_KINDS = tuple(SCANS)
#: what a sort node gives: the sorted values, or their positions before sorting
SORT_OUTPUTS = ("values", "indices")
