"""Reduction kinds: one table, one row per kind, read by the lowering (what a body yields), the
verifiers (kinds and dtypes), the evaluator (the torch reference), the kernel builder (neutral
value, combine op, accumulator dtype) and the Triton emitter (the template of `triton.reduce`).

Four families share the table: plain kinds fold values with a scalar op (sum, prod, max, min);
logical kinds fold b8 (any, all); index kinds find the position of the best value (argmax,
argmin: the result is i64, the accumulator a (value, index) pair); `online_softmax` gives a
row's max and its sum of exp(v - max) at once (two results: the scheduled dialect's rewrite of
softmax, passes/online_softmax.py, as Inductor's online_softmax_reduce); `welford` gives a row's
mean and its sum of squared deviations m2 in one pass (two results: the rewrite of a two-pass
variance, passes/welford.py, as Inductor's welford_reduce). The two-result kinds' parts merge by
`online_softmax_merge` and `welford_merge`, on kernel blocks (a looped kernel's lanes, a
cooperative group's chunks) as on a split reduction's partials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from mind.ir import dtypes as dt
from mind.ir.dtypes import DType


@dataclass(frozen=True)
class Reduction:
    name: str
    #: the scalar op that folds one more value into an accumulator (for index kinds, the one
    #: that picks the better value: `maximum` for argmax)
    combine: str
    #: the neutral element: "zero", "one", "lowest" or "highest" of the accumulator dtype
    neutral_of: str
    #: the torch.Tensor method reducing the last dim (the evaluator's reference)
    torch: str
    #: Python for `triton.reduce(value, axis)` over {v}, {axis}, {dt}; for index kinds the
    #: triton_helpers function of `triton.reduce_index`
    triton: str
    #: "plain", "logical" (reads and accumulates b8), "index" (yields the position, i64),
    #: "online_softmax" or "welford"
    family: str = "plain"
    #: f16/bf16 accumulate in f32, as eager's kernels do (exact for max and min, which Triton's
    #: interpreter also compares wrongly in bf16)
    upcast: bool = False
    #: how many values it gives
    results: int = 1
    #: reducing no element gives the neutral value (eager's sum 0, prod 1, any False, all
    #: True); for the others (max, min, the index kinds) eager raises
    empty_is_neutral: bool = False

    @property
    def is_index(self) -> bool:
        return self.family == "index"

    @property
    def is_logical(self) -> bool:
        return self.family == "logical"

    def yield_dtype(self, result: DType) -> DType | None:
        """What a loops reduction body yields for a result of `result` dtype: b8 for logical
        kinds, the value as is (None: any dtype) for index kinds, the accumulator's otherwise:
        a sum of bf16 values yields each in f32, as the kernel adds it, so that an inlined
        producer's rounding to bf16 goes as for any consumer that widens it (Inductor's kernels
        add the unrounded value too). The verifier also takes the result dtype, which the kernel
        widens."""
        if self.is_logical:
            return dt.b8
        return None if self.is_index else self.accumulator(result, result)

    def accumulator(self, value: DType, result: DType) -> DType:
        """The dtype a kernel accumulates in, given the reduced value's and the result's: sums
        and products of f16/bf16 in f32 (as Inductor does: a bf16 running sum loses a row's
        small terms), the result cast back once."""
        if self.is_logical:
            return dt.b8
        if self.is_index:
            return value
        return dt.upcast(result) if self.upcast else result

    def neutral(self, dtype: DType) -> float | int | bool:
        """The value a masked lane contributes: it leaves the reduction unchanged."""
        return neutral_value(self.neutral_of, dtype)


def neutral_value(neutral_of: str, dtype: DType) -> float | int | bool:
    """A neutral value by name ("zero", "one", "lowest", "highest") as a number of `dtype`."""
    if dtype == dt.b8:
        return neutral_of in ("one", "highest")
    table = {"zero": 0, "one": 1, "lowest": dt.lowest(dtype), "highest": dt.highest(dtype)}
    return dt.literal(table[neutral_of], dtype)


REDUCTIONS: dict[str, Reduction] = {
    r.name: r
    for r in (
        Reduction("sum", "add", "zero", "sum", "tl.sum({v}, {axis}, keep_dims=True).to({dt})",
                  upcast=True, empty_is_neutral=True),
        Reduction("prod", "mul", "one", "prod", "triton_helpers.prod({v}, {axis}).to({dt})",
                  upcast=True, empty_is_neutral=True),
        # NaN wins, as in torch (tl.max/tl.min drop it): Inductor's max2/min2 reduce the same way
        Reduction("max", "maximum", "lowest", "amax",
                  "tl.reduce({v}, {axis}, triton_helpers.maximum, keep_dims=True).to({dt})",
                  upcast=True),
        Reduction("min", "minimum", "highest", "amin",
                  "tl.reduce({v}, {axis}, triton_helpers.minimum, keep_dims=True).to({dt})",
                  upcast=True),
        Reduction("argmax", "maximum", "lowest", "argmax", "argmax", family="index"),
        Reduction("argmin", "minimum", "highest", "argmin", "argmin", family="index"),
        Reduction("any", "logical_or", "zero", "any",
                  "tl.max({v}.to(tl.int8), {axis}, keep_dims=True) != 0", family="logical",
                  empty_is_neutral=True),
        Reduction("all", "logical_and", "one", "all",
                  "tl.min({v}.to(tl.int8), {axis}, keep_dims=True) != 0", family="logical",
                  empty_is_neutral=True),
        Reduction("online_softmax", "maximum", "lowest", "amax", "", family="online_softmax",
                  results=2),
        Reduction("welford", "add", "zero", "mean", "", family="welford", upcast=True,
                  results=2),
    )
}  # fmt: skip

#: every kind's name, in table order
KINDS = tuple(REDUCTIONS)
#: the kinds that give one value: what loops reductions and triton reduce ops perform
SINGLE_KINDS = tuple(k for k, r in REDUCTIONS.items() if r.results == 1)
#: what `triton.reduce` performs along an axis, and what `triton.reduce_index` does
REDUCE_KINDS = tuple(k for k in SINGLE_KINDS if not REDUCTIONS[k].is_index)
INDEX_KINDS = tuple(k for k in SINGLE_KINDS if REDUCTIONS[k].is_index)


V = TypeVar("V")


class Arith(Generic[V]):
    """Scalar arithmetic on some representation of values (body ops, kernel blocks), as the
    merges below use it, from three primitives a representation gives: an op by name, a
    reduction over the parts being merged, and a constant."""

    def op(self, name: str, args: list[V], predicate: bool = False) -> V:
        """The scalar op `name` of `args` (a b8 result where `predicate`)."""
        raise NotImplementedError

    def reduce(self, x: V, kind: str) -> V:
        """`x` reduced over the parts being merged by the plain kind `kind`."""
        raise NotImplementedError

    def constant(self, value: float) -> V:
        raise NotImplementedError

    def sum(self, x: V) -> V:
        return self.reduce(x, "sum")

    def max(self, x: V) -> V:
        return self.reduce(x, "max")

    def add(self, a: V, b: V) -> V:
        return self.op("add", [a, b])

    def sub(self, a: V, b: V) -> V:
        return self.op("sub", [a, b])

    def mul(self, a: V, b: V) -> V:
        return self.op("mul", [a, b])

    def truediv(self, a: V, b: V) -> V:
        return self.op("truediv", [a, b])

    def exp(self, x: V) -> V:
        return self.op("exp", [x])

    def eq(self, a: V, b: V) -> V:
        return self.op("eq", [a, b], predicate=True)

    def where(self, condition: V, a: V, b: V) -> V:
        return self.op("where", [condition, a, b])


def welford_merge(ops: Arith[V], mean: V, m2: V, weight: V) -> tuple[V, V]:
    """The welford kind's combine: the (mean, m2) of a row from those of its parts, each of
    `weight` elements (Chan et al.'s parallel formula over any number of parts; an empty part has
    weight 0 and adds nothing). Deviations are taken from the merged mean, never as a difference
    of large sums: a row at a large offset keeps its precision."""
    total = ops.sum(weight)
    merged = ops.truediv(ops.sum(ops.mul(weight, mean)), total)
    dev = ops.sub(mean, merged)
    return merged, ops.add(ops.sum(m2), ops.sum(ops.mul(weight, ops.mul(dev, dev))))


def online_softmax_merge(ops: Arith[V], top: V, total: V) -> tuple[V, V]:
    """The online_softmax kind's combine: a row's max M and sum of exp(v - M) from its parts'
    (m, s), each part's sum rescaled to M: S = sum(s * exp(m - M)). A part that saw only -inf
    adds nothing, whatever its s (exp(-inf - -inf) is nan); a row of -inf alone gets M = -inf,
    and its normalization eager's nan."""
    row_max = ops.max(top)
    scaled = ops.mul(total, ops.exp(ops.sub(top, row_max)))
    empty = ops.eq(top, ops.constant(float("-inf")))
    return row_max, ops.sum(ops.where(empty, ops.constant(0.0), scaled))
