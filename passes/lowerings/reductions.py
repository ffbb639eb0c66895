"""Reductions over any dims, with keepdim: one `loops.reduction` node each, or a pointwise node
folding the row where it has at most `lower{unroll-reductions}` elements (`unrolled`); mean and
variance are built from sums (a reduction, then pointwise math on its result)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import sympy
import torch
from mind.dialects.reductions import REDUCTIONS
from mind.ir import dtypes as dt
from mind.ir.core import Value
from mind.ir.dtypes import DType

from . import register_lowering
from .common import norm_dims

aten = torch.ops.aten

#: aten packet -> loops reduction_type
REDUCTION_OF = {
    "sum": "sum",
    "prod": "prod",
    "amax": "max",
    "amin": "min",
    "max": "max",
    "min": "min",
    "argmax": "argmax",
    "argmin": "argmin",
    "any": "any",
    "all": "all",
}


def reduce(
    ctx,
    x: Value,
    dims,
    keepdim: bool,
    reduction_type: str,
    dtype: DType,
    fn: Callable | None = None,
) -> Value:
    """Reduce `fn(b, x[index], idx)` (default: the loaded element) over `dims` of x."""
    rank = x.type.rank
    dims = [d for d in norm_dims(dims, rank) if d < rank]
    kept = [d for d in range(rank) if d not in dims]
    shape = [1 if d in dims else x.type.shape[d] for d in range(rank) if keepdim or d not in dims]
    ranges = [x.type.shape[d] for d in dims]
    kind = REDUCTIONS[reduction_type]

    def body(b, idx, ridx=()):
        index = [
            ridx[dims.index(d)] if d in dims else idx[d if keepdim else kept.index(d)]
            for d in range(rank)
        ]
        value = b.load(x, index)
        if kind.is_index:  # compared in f32, as Inductor does: over bf16, Triton's interpreter
            # gave positions past the row
            value = b.cast(value, dt.upcast(value.type.dtype))
        return fn(b, value, idx) if fn else value

    if math.prod(ranges) == 0 and kind.empty_is_neutral:  # no element: the neutral value
        return ctx.pointwise(dtype, shape, lambda b, idx: b.constant(kind.neutral(dtype), dtype))
    if math.prod(ranges) == 1 and kind.is_index:  # one element per row: its position, 0
        return ctx.pointwise(dtype, shape, lambda b, idx: b.constant(0, dtype))
    count = sympy.sympify(math.prod(ranges))
    # one element per row (a 0-d input, size-1 dims) folds too: through the kind's accumulator
    # (`any` of a uint8 5 is 1)
    if count.is_Integer and 0 < count <= max(1, ctx.unroll_max) and not kind.is_index:
        unroll = functools.partial(unrolled, ranges=ranges, kind=kind, dtype=dtype, body=body)
        return ctx.pointwise(dtype, shape, unroll)
    return ctx.reduction(dtype, shape, ranges, reduction_type, body)


def unrolled(b, idx, *, ranges, kind, dtype: DType, body: Callable) -> Value:
    """`body` at every position of `ranges`, folded in order by the kind's combine op, in its
    accumulator dtype for a `dtype` result (bf16 sums in f32, logical kinds in b8): a reduction
    of a few elements a row (`lower{unroll-reductions}`, as Inductor's
    `unroll_reductions_threshold`), whose kernel would run tiny programs (Llama's sum of a key
    gradient over its group of 4 heads took 11 us on an H200 as a reduction, Inductor's
    unrolled pointwise kernel 1.7 us)."""
    values = [body(b, idx, ridx) for ridx in itertools.product(*(range(int(n)) for n in ranges))]
    acc = kind.accumulator(values[0].type.dtype, dtype)
    values = [v if v.type.dtype == acc else b.cast(v, acc) for v in values]
    return functools.reduce(getattr(b, kind.combine), values)


def numel(x: Value, dims) -> object:
    rank = x.type.rank
    return math.prod(x.type.shape[d] for d in norm_dims(dims, rank) if d < rank)


@register_lowering(aten.sum, aten.prod, aten.amax, aten.amin, aten.any, aten.all)
@register_lowering(aten.max.default, aten.min.default, aten.argmax, aten.argmin)
def reduction(ctx, x, dims=None, keepdim=False, *, dtype=None):
    return reduce(ctx, x, dims, keepdim, REDUCTION_OF[ctx.origin], ctx.out.dtype)


@register_lowering(aten.max.dim, aten.min.dim)
def max_dim(ctx, x, dim, keepdim=False):
    """The values and the indices: two reductions over the same loads."""
    kind = REDUCTION_OF[ctx.origin]
    values = reduce(ctx, x, dim, keepdim, kind, ctx.outs[0].dtype)
    return values, reduce(ctx, x, dim, keepdim, f"arg{kind}", dt.i64)


def divide(ctx, total: Value, count, dtype: DType) -> Value:
    """A pointwise node `total / count` cast to `dtype`."""

    def body(b, idx):
        t = b.load(total, idx)
        return b.truediv(t, b.constant(count, t.type.dtype))

    return ctx.pointwise(dtype, total.type.shape, body)


@register_lowering(aten.mean)
def mean(ctx, x, dims=None, keepdim=False, *, dtype=None):
    acc = dt.upcast(ctx.out.dtype)
    total = reduce(ctx, x, dims, keepdim, "sum", acc, lambda b, v, idx: b.cast(v, acc))
    return divide(ctx, total, numel(x, dims), ctx.out.dtype)


def _var(ctx, x, dims, correction, keepdim):
    """Two passes: the mean, then the sum of squared deviations over n - correction."""
    acc = dt.upcast(x.type.dtype)
    n = numel(x, dims)
    total = reduce(ctx, x, dims, keepdim, "sum", acc, lambda b, v, idx: b.cast(v, acc))

    def square_dev(b, v, idx):
        m = b.truediv(b.load(total, idx), b.constant(n, acc))
        d = b.sub(b.cast(v, acc), m)
        return b.mul(d, d)

    squares = reduce(ctx, x, dims, keepdim, "sum", acc, square_dev)
    correction = 1 if correction is None else correction
    dof = sympy.Max(sympy.sympify(n - correction), 0)  # as eager: no negative degrees (a NaN)
    var = divide(ctx, squares, dof, ctx.outs[0].dtype)
    return var, total, n


@register_lowering(aten.var.correction)
def var(ctx, x, dims=None, *, correction=None, keepdim=False):
    return _var(ctx, x, dims, correction, keepdim)[0]


@register_lowering(aten.var_mean.correction)
def var_mean(ctx, x, dims=None, *, correction=None, keepdim=False):
    var_, total, n = _var(ctx, x, dims, correction, keepdim)
    return var_, divide(ctx, total, n, ctx.outs[1].dtype)
