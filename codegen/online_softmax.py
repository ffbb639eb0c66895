"""The `online_softmax` reduction kind's block ops: a row's max M and its sum S of exp(v - M).

In registers (a persistent kernel) it is two reductions over the row the registers hold: the
max, then the sum of exp(v - max) (as Inductor's persistent softmax: loading the row again would
cost a second read, from cache at best).

In an r-loop (a looped kernel), as Inductor does, each lane carries its running max m and
running sum s, rescaled whenever the max grows:

    m_new = maximum(m, x);  s = where(m_new == -inf, 0, s * exp(m - m_new) + exp(x - m_new))

and after the loop the lanes combine by the kind's merge (dialects/reductions.py
`online_softmax_merge`): M = max(m, axis); S = sum(where(m == -inf, 0, s * exp(m - M)), axis).
A lane that has seen only -inf (masked lanes, whose x is -inf, or -inf inputs) holds s = 0, which
keeps exp(-inf - -inf) = nan out of the sum; an all -inf row gets M = -inf, and the normalizing
loop's exp(x - M) gives eager's nan.
"""

from __future__ import annotations

from mind.dialects.reductions import REDUCTIONS, online_softmax_merge
from mind.dialects.scheduled import Reduction as ReductionOp
from mind.dialects.triton import dtype_of
from mind.ir import dtypes as dt
from mind.ir.core import Value

from .accumulators import ACCUMULATORS, Accumulator, Blocks, Partial, keep_masked, reduce_block
from .kernel import KernelBuilder, Scope

MAX, SUM = REDUCTIONS["max"], REDUCTIONS["sum"]


class OnlineSoftmax(Accumulator):
    def rows(self, b, scope, op):
        dtype = op.results[0].type.dtype
        v = scope.values[op.value]
        row_max = reduce_block(b, scope, [b.masked_input(scope, v, MAX.neutral(dtype), dtype)], MAX, dtype)  # fmt: skip
        exp = b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [v, row_max], dtype)], dtype)
        total = b.masked_input(scope, exp, SUM.neutral(dtype), dtype)
        return [row_max, reduce_block(b, scope, [total], SUM, dtype)]

    def init(self, b, scope, op):
        dtype, full = op.results[0].type.dtype, b.tiling.full_shape
        return [b.full(scope, MAX.neutral(dtype), dtype, full), b.full(scope, 0.0, dtype, full)]

    def step(self, b, scope, op, acc, mask):
        (m, s), dtype = acc, dtype_of(acc[0])
        x = b.masked_input(scope, scope.values[op.value], MAX.neutral(dtype), dtype)
        m_new = b.emit_op(scope, "maximum", [m, x], dtype)
        (m_next,) = keep_masked(b, scope, [m_new], [m], mask)
        ninf, zero = _constants(b, scope, dtype)
        scale, term = _exp_sub(b, scope, m, m_new), _exp_sub(b, scope, x, m_new)
        total = b.emit_op(scope, "add", [b.emit_op(scope, "mul", [s, scale], dtype), term], dtype)
        empty = b.emit_op(scope, "eq", [m_new, ninf], dt.b8)
        s_new = b.emit_op(scope, "where", [empty, zero, total], dtype)
        return [m_next, *keep_masked(b, scope, [s_new], [s], mask)]

    def cooperates(self, op):
        return op.results[0].type.dtype == dt.f32

    def partial(self, b, scope, op):
        """The chunk's max m and its sum of e = exp(v - base), base = m, or 0 for a chunk of -inf
        alone (whose e and sum are then 0, not exp(-inf - -inf), nan, as a lane that has seen
        only -inf sums in an r-loop). The chunk's e stays in registers for the row's softmax
        (`_normalized`)."""
        v = scope.values[op.value]
        m = reduce_block(b, scope, [b.masked_input(scope, v, MAX.neutral(dt.f32), dt.f32)], MAX, dt.f32)  # fmt: skip
        ninf, zero = _constants(b, scope, dt.f32)
        base = b.emit_op(
            scope, "where", [b.emit_op(scope, "eq", [m, ninf], dt.b8), zero, m], dt.f32
        )
        e = _exp_sub(b, scope, v, base)
        s = reduce_block(b, scope, [b.masked_input(scope, e, SUM.neutral(dt.f32), dt.f32)], SUM, dt.f32)  # fmt: skip
        return Partial(
            [(m, float("-inf")), (s, 0.0)],
            lambda merged: _normalized(b, scope, op, e, base, merged),
        )

    def finish(self, b, scope, op, out):
        m, s = out
        return list(online_softmax_merge(Blocks(b, scope, dtype_of(s)), m, s))


def _normalized(
    b: KernelBuilder, scope: Scope, op: ReductionOp, e: Value, base: Value, merged: list[Value]
) -> dict[Value, Value]:
    """Each exp(v - M) of the body that is only divided by the row's sum S, as the chunk's e
    rescaled, e * exp(base - M): an exp of a row value less a multiply per element. Exact where
    the quotient is: a chunk of -inf alone gives 0 (e = 0) where M is finite, and nan (0 * inf)
    where the whole row is -inf (M = -inf, eager's nan); a row holding +inf or nan has S nan. An
    exp used otherwise is left to the body (a row holding +inf would give nan for its 0)."""
    v, (row_max, row_sum) = op.value, op.results
    scale = None
    found = {}
    for sub in row_max.users:
        if sub.kind != "sub" or list(sub.operands) != [v, row_max]:
            continue
        for exp in sub.result.users:
            if exp.kind == "exp" and all(
                u.kind == "truediv" and list(u.operands) == [exp.result, row_sum]
                for u in exp.result.users
            ):
                scale = scale or _exp_sub(b, scope, base, merged[0])
                found[exp.result] = b.emit_op(scope, "mul", [e, scale], dt.f32)
    return found


def _constants(b: KernelBuilder, scope: Scope, dtype: dt.DType) -> tuple[Value, Value]:
    ones = (1,) * len(b.tiling.full_shape)
    return b.full(scope, float("-inf"), dtype, ones), b.full(scope, 0.0, dtype, ones)


def _exp_sub(b: KernelBuilder, scope: Scope, x: Value, y: Value) -> Value:
    """exp(x - y)."""
    dtype = dtype_of(x)
    return b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [x, y], dtype)], dtype)


ACCUMULATORS["online_softmax"] = OnlineSoftmax()
