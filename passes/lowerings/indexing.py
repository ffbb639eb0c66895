"""Gathers as indirect loads: the index read from one tensor becomes a symbol `i0, i1, ...` in
the index of the load from another (`loops.load(%w, 16*i0 + p2) {indirect = [%0]}`)."""

from __future__ import annotations

import torch
from mind.ir import dtypes as dt
from mind.ir.core import Value
from mind.ir.diagnostics import MindError

from . import Unsupported, register_lowering
from .common import is_tensor, norm_dim

aten = torch.ops.aten


def index_value(b, t: Value, index, size, wrap: bool = True) -> Value:
    """The i64 index read from `t`; negative positions count from the end (`size`). Out of
    bounds, the kernel asserts (as Inductor's do) where eager raises an IndexError."""
    v = b.cast(b.load(t, index), dt.i64)
    if wrap:
        negative = b.lt(v, b.constant(0, dt.i64))
        bound = b.constant(size, dt.i64)
        v = b.where(negative, b.add(v, bound), v)
    else:
        bound = b.constant(size, dt.i64)
    return b.check_index(v, bound)


@register_lowering(aten.embedding)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """`out[..., j] = weight[indices[...], j]`."""
    out = ctx.out
    k = indices.type.rank

    def body(b, idx):
        row = index_value(b, indices, idx[:k], weight.type.shape[0], wrap=False)
        return b.load(weight, [row, *idx[k:]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.gather)
def gather(ctx, x, dim, index, *, sparse_grad=False):
    """`out[p] = x[p with dim replaced by index[p]]`."""
    out = ctx.out
    dim = norm_dim(dim, x.type.rank)

    def body(b, idx):
        i = index_value(b, index, idx, x.type.shape[dim] if x.type.rank else 1)
        return b.load(x, [*idx[:dim], i, *idx[dim + 1 :]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.index_select)
def index_select(ctx, x, dim, index):
    out = ctx.out
    dim = norm_dim(dim, x.type.rank)

    def body(b, idx):
        if not x.type.rank:  # a 0-d input: its one element, whatever the (one) index says
            return b.load(x, [])
        i = index_value(b, index, [idx[dim]] if index.type.rank else [], x.type.shape[dim])
        return b.load(x, [*idx[:dim], i, *idx[dim + 1 :]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.index.Tensor)
def index(ctx, x, indices):
    """Advanced indexing: the index tensors broadcast to one shape B; adjacent indexed dims are
    replaced by B in place, scattered ones put B first."""
    out = ctx.out
    indices = list(indices) + [None] * (x.type.rank - len(indices))
    used = [d for d, t in enumerate(indices) if t is not None]
    if not used:
        raise MindError("'aten.index.Tensor' needs at least one index tensor")
    if any(not is_tensor(indices[d]) or indices[d].type.dtype in (dt.b8, dt.u8) for d in used):
        raise Unsupported("boolean mask indices (data-dependent shape)")
    nb = max(indices[d].type.rank for d in used)
    adjacent = used == list(range(used[0], used[-1] + 1))
    start = used[0] if adjacent else 0

    def body(b, idx):
        bidx = idx[start : start + nb]
        rest = iter(idx[:start] + idx[start + nb :])
        src = []
        for d, t in enumerate(indices):
            src.append(index_value(b, t, bidx, x.type.shape[d]) if t is not None else next(rest))
        return b.load(x, src)

    return ctx.pointwise(out.dtype, out.shape, body)
