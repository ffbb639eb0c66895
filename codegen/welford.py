"""The `welford` reduction kind's block ops: a row's mean and its sum of squared deviations m2.

In registers (a persistent kernel) it is two passes over the row it holds: the mean, then the
squared deviations from it, exact and free of a second read.

In an r-loop (a looped kernel), as Inductor's welford_reduce, each lane carries its running mean,
m2 and count, one element at a time:

    n += 1;  delta = x - mean;  mean += delta / n;  m2 += delta * (x - mean)

so the row is read once. Where no lane of the block is masked along r, n is the same for every
lane, so it is carried as one value and `delta / n` is `delta * (1 / n)`: a division per block,
not per element. After the loop the lanes merge by the kind's combine (`welford_merge`,
dialects/reductions.py): lanes that saw nothing have count 0 and add nothing.
"""

from __future__ import annotations

from mind.dialects.reductions import welford_merge
from mind.dialects.triton import dtype_of, shape_of
from mind.ir import dtypes as dt
from mind.ir.core import Value

from .accumulators import ACCUMULATORS, Accumulator, Blocks, Partial, keep_masked
from .kernel import KernelBuilder, Scope


class Welford(Accumulator):
    def rows(self, b, scope, op):
        dtype = op.results[0].type.dtype
        ops = Blocks(b, scope, dtype)
        v = b.masked_input(scope, scope.values[op.value], 0.0, dtype)
        mean = ops.truediv(ops.sum(v), _row_length(b, scope, dtype))
        dev = b.masked_input(scope, ops.sub(v, mean), 0.0, dtype)
        return [mean, ops.sum(ops.mul(dev, dev))]

    def init(self, b, scope, op):
        dtype, full = op.results[0].type.dtype, b.tiling.full_shape
        count = (1,) * len(full) if _uniform(b) else full
        return [b.full(scope, 0.0, dtype, shape) for shape in (full, full, count)]  # mean, m2, n

    def step(self, b, scope, op, acc, mask):
        (mean, m2, count), dtype = acc, dtype_of(acc[0])
        ops = Blocks(b, scope, dtype)
        x = scope.values[op.value]
        if dtype_of(x) != dtype:
            x = b.emit(scope, "cast", [x], dtype, b.tiling.full_shape)
        one = b.full(scope, 1.0, dtype, (1,) * len(b.tiling.full_shape))
        count_new = ops.add(count, one)
        delta = ops.sub(x, mean)
        if _uniform(b):  # one reciprocal per block, not a division per element
            mean_new = ops.add(mean, ops.mul(delta, ops.truediv(one, count_new)))
        else:
            mean_new = ops.add(mean, ops.truediv(delta, count_new))
        m2_new = ops.add(m2, ops.mul(delta, ops.sub(x, mean_new)))
        if _uniform(b):  # rows past xnumel are never stored: their count may run on
            return [*keep_masked(b, scope, [mean_new, m2_new], acc[:2], mask), count_new]
        return keep_masked(b, scope, [mean_new, m2_new, count_new], acc, mask)

    def finish(self, b, scope, op, out):
        mean, m2, count = out
        ops = Blocks(b, scope, dtype_of(mean))
        if shape_of(count) != shape_of(mean):  # one count for all lanes: each lane's, to merge by
            count = ops.add(b.full(scope, 0.0, dtype_of(mean), shape_of(mean)), count)
        return list(welford_merge(ops, mean, m2, count))

    def cooperates(self, op):
        return op.results[0].type.dtype == dt.f32

    def partial(self, b, scope, op):
        """The chunk's mean, m2 and element count (fewer in a last chunk past the row's end)."""
        ops = Blocks(b, scope, dt.f32)
        v = b.masked_input(scope, scope.values[op.value], 0.0, dt.f32)
        mask = b.mask(scope, [b.tiling.rgroup])
        if mask is None:
            count = b.full(scope, float(b.tiling.config.blocks["R0_BLOCK"]), dt.f32, (1, 1))
        else:
            count = ops.sum(b.masked_input(scope, b.full(scope, 1.0, dt.f32, (1, 1)), 0.0, dt.f32))
        mean = ops.truediv(ops.sum(v), count)
        dev = b.masked_input(scope, ops.sub(v, mean), 0.0, dt.f32)
        return Partial([(mean, 0.0), (ops.sum(ops.mul(dev, dev)), 0.0), (count, 0.0)])


def _uniform(b: KernelBuilder) -> bool:
    """Whether every lane of a row sees the same number of elements in the r-loop (no r mask):
    then the running count is one value for the block, and its reciprocal one division."""
    return not b.tiling.rgroup.masked


def _row_length(b: KernelBuilder, scope: Scope, dtype: dt.DType) -> Value:
    """The row's element count as a `dtype` block: a constant, or the r0_numel argument."""
    rnumel = b.tiling.rgroup.numel
    ones = (1,) * len(b.tiling.full_shape)
    if isinstance(rnumel, int):
        return b.full(scope, float(rnumel), dtype, ones)
    return b.emit(scope, "cast", [b.numels["r0_"]], dtype, ())


ACCUMULATORS["welford"] = Welford()
