"""cat and constant_pad_nd: pointwise nodes whose loads are masked by the position along a dim
(`loops.load ... {mask, other}`), the pieces combined with `where`."""

from __future__ import annotations

import torch
from mind.ir import dtypes as dt
from mind.ir.dtypes import DType

from . import register_lowering
from .common import norm_dim

aten = torch.ops.aten


def zero_of(dtype: DType):
    """The `other` of a masked load: a zero of the loaded dtype's kind."""
    return False if dtype == dt.b8 else 0.0 if dtype.is_floating_point else 0


def in_range(b, pos, lo, hi, size):
    """A b8 body value `lo <= pos < hi`, or None when that holds for every pos in [0, size)."""
    conds = []
    if not (isinstance(lo, int) and lo <= 0):
        conds.append(b.ge(pos, b.constant(lo, dt.i64)))
    if not (hi == size or (isinstance(hi, int) and isinstance(size, int) and hi >= size)):
        conds.append(b.lt(pos, b.constant(hi, dt.i64)))
    mask = conds[0] if conds else None
    for cond in conds[1:]:
        mask = b.logical_and(mask, cond)
    return mask


def masked_load(b, x, index, mask):
    return b.load(x, index, mask=mask, other=zero_of(x.type.dtype)) if mask else b.load(x, index)


@register_lowering(aten.cat)
def cat(ctx, tensors, dim=0):
    out = ctx.out
    dim = norm_dim(dim, out.rank)
    parts = [t for t in tensors if not (t.type.rank == 1 and t.type.shape[0] == 0)]
    size = out.shape[dim]

    def body(b, idx):
        pos = b.index(idx[dim])
        pieces, offset = [], 0
        for t in parts:
            end = offset + t.type.shape[dim]
            mask = in_range(b, pos, offset, end, size)
            index = [*idx[:dim], idx[dim] - offset, *idx[dim + 1 :]]
            pieces.append((mask, b.cast(masked_load(b, t, index, mask), out.dtype)))
            offset = end
        value = pieces[-1][1]
        for mask, piece in reversed(pieces[:-1]):
            value = b.where(mask, piece, value)
        return value

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(ctx, x, pad, value=0):
    """`pad` lists (before, after) pairs from the last dim backwards; negative pads crop."""
    out = ctx.out
    rank = out.rank
    pads = {rank - 1 - k: (pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)}

    def body(b, idx):
        index, mask = list(idx), None
        for d, (lo, _) in pads.items():
            index[d] = idx[d] - lo
            cond = in_range(b, b.index(idx[d]), lo, lo + x.type.shape[d], out.shape[d])
            if cond is not None:
                mask = cond if mask is None else b.logical_and(mask, cond)
        loaded = b.cast(masked_load(b, x, index, mask), out.dtype)
        return b.where(mask, loaded, b.constant(value, out.dtype)) if mask else loaded

    return ctx.pointwise(out.dtype, out.shape, body)
