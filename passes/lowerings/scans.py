"""Scans and sorts along one dim, as Inductor lowers them (its ir.Scan, ir.Sort): cumsum, cumprod,
logcumsumexp, cummax and cummin are `loops.scan` nodes (cummax: one for the values, one for the
indices), sort is two `loops.sort` nodes (the values, the indices). A dim of one element (or
none) needs no scan: the result is the input (positions 0), pointwise.

Sorting runs in registers, so a sort along a symbolic dim or one of more than SORT_MAX elements
stays an ATen call, as in Inductor. topk stays an ATen call too: Inductor computes it by sorting
only under `config.triton.decompose_sort_ops`, off by default.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from mind.ir import dtypes as dt
from mind.ir.core import Value
from mind.ir.dtypes import DType

from . import Unsupported, register_lowering
from .common import norm_dim

aten = torch.ops.aten

#: the longest dim sorted in registers (Inductor's bound for its persistent sort kernel)
SORT_MAX = 512

#: a loops node along one axis of x: (ctx, dtype, axis, body) -> its value
AlongAxis = Callable[[object, DType, int, Callable], Value]


def _along(ctx, x: Value, dim: int, dtype: DType, index: bool, node: AlongAxis) -> Value:
    """`node` over x's shape along `dim`, its body the element of x (cast to `dtype`, unless
    `index`: then the node yields the value it compares and gives positions). A dim of at most
    one element makes a pointwise node: the element, or position 0."""
    rank = x.type.rank
    axis = norm_dim(dim, rank)
    size = x.type.shape[axis] if rank else 1
    if isinstance(size, int) and size <= 1:
        if index:
            return ctx.pointwise(dtype, x.type.shape, lambda b, idx: b.constant(0, dtype))
        return ctx.pointwise(dtype, x.type.shape, lambda b, idx: b.cast(b.load(x, idx), dtype))

    def body(b, idx):
        value = b.load(x, idx)
        return value if index else b.cast(value, dtype)

    return node(ctx, dtype, axis, body)


def _scan(kind: str) -> AlongAxis:
    def node(ctx, dtype: DType, axis: int, body: Callable) -> Value:
        return ctx.scan(dtype, ctx.out.shape, axis, kind, body)

    return node


@register_lowering(aten.cumsum.default, aten.cumprod.default)
def cumulative(ctx, x, dim, *, dtype=None):
    """The scan in the result's dtype (integers and bools in i64, as eager)."""
    kind = "sum" if ctx.origin == "cumsum" else "prod"
    return _along(ctx, x, dim, ctx.out.dtype, False, _scan(kind))


@register_lowering(aten.logcumsumexp.default)
def logcumsumexp(ctx, x, dim):
    return _along(ctx, x, dim, ctx.out.dtype, False, _scan("logsumexp"))


@register_lowering(aten.cummax.default, aten.cummin.default)
def cummax(ctx, x, dim):
    """The running best value, and the position it is at (the latest on ties)."""
    kind = ctx.origin[3:]  # max, min
    values = _along(ctx, x, dim, ctx.outs[0].dtype, False, _scan(kind))
    return values, _along(ctx, x, dim, dt.i64, True, _scan(f"arg{kind}"))


def _sort(descending: bool, output: str) -> AlongAxis:
    def node(ctx, dtype: DType, axis: int, body: Callable) -> Value:
        return ctx.sort(dtype, ctx.out.shape, axis, descending, output, body)

    return node


@register_lowering(aten.sort.default)
def sort(ctx, x, dim=-1, descending=False):
    """Stable, whatever is asked: ties keep their order (an unstable sort may do so too)."""
    rank = x.type.rank
    size = x.type.shape[norm_dim(dim, rank)] if rank else 1
    if not isinstance(size, int) or size > SORT_MAX:
        raise Unsupported(f"a sort along {size} elements")
    values = _along(ctx, x, dim, x.type.dtype, False, _sort(descending, "values"))
    return values, _along(ctx, x, dim, dt.i64, True, _sort(descending, "indices"))


@register_lowering(aten.sort.stable)
def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    return sort(ctx, x, dim, descending)
