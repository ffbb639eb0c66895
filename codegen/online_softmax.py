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
from mind.dialects.triton import dtype_of
from mind.ir import dtypes as dt
from mind.ir.core import Value

from .accumulators import ACCUMULATORS, Accumulator, Blocks, keep_masked, reduce_block
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
        """The chunk's max and sum; a chunk of -inf alone sums to 0 (not exp(-inf - -inf),
        nan), as a lane that has seen only -inf does in an r-loop."""
        m, s = self.rows(b, scope, op)
        ninf, zero = _constants(b, scope, dt.f32)
        empty = b.emit_op(scope, "eq", [m, ninf], dt.b8)
        return [(m, float("-inf")), (b.emit_op(scope, "where", [empty, zero, s], dt.f32), 0.0)]

    def finish(self, b, scope, op, out):
        m, s = out
        return list(online_softmax_merge(Blocks(b, scope, dtype_of(s)), m, s))


def _constants(b: KernelBuilder, scope: Scope, dtype: dt.DType) -> tuple[Value, Value]:
    ones = (1,) * len(b.tiling.full_shape)
    return b.full(scope, float("-inf"), dtype, ones), b.full(scope, 0.0, dtype, ones)


def _exp_sub(b: KernelBuilder, scope: Scope, x: Value, y: Value) -> Value:
    """exp(x - y)."""
    dtype = dtype_of(x)
    return b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [x, y], dtype)], dtype)


ACCUMULATORS["online_softmax"] = OnlineSoftmax()
