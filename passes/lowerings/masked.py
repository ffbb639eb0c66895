"""cat, constant_pad_nd, slice_scatter and diagonal_scatter: pointwise nodes whose loads are
masked by the position along a dim (`loops.load ... {mask, other}`), the pieces combined with
`where`."""

from __future__ import annotations

import sympy
import torch
from mind.ir import dtypes as dt
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import Mod

from . import register_lowering
from .common import norm_dim
from .views import clamp_start

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
    # pieces empty along `dim` (a partial rotary's pass-through of width 0) join nothing, nor
    # do legacy empty 1-d inputs of another rank; when all are, the result is empty too
    parts = [t for t in tensors if not _joins_nothing(t, dim)] or tensors[:1]
    size = out.shape[dim]
    _check_cat_sizes([t.type.shape for t in parts if t.type.rank == out.rank], out.shape, dim)

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


def _check_cat_sizes(shapes: list, out: tuple, dim: int) -> None:
    """Refuse pieces that provably do not make `out` (sizes that differ by a number): the
    verifier's fake run checks static sizes, this the symbolic ones it cannot run."""
    joined = (sum((s[dim] for s in shapes), 0), out[dim])
    pairs = [joined, *((s[d], out[d]) for s in shapes for d in range(len(out)) if d != dim)]
    for got, want in pairs:
        gap = got - want
        gap = gap if isinstance(gap, int) else sympy.expand(gap)
        if gap != 0 and (isinstance(gap, int) or gap.is_number):
            raise MindError(
                f"cat's pieces of sizes {[list(s) for s in shapes]} do not make {list(out)}"
            )


def _joins_nothing(t, dim: int) -> bool:
    """Whether cat's piece `t` adds no element along `dim` (its mask would cover no position)."""
    shape = t.type.shape
    return (t.type.rank == 1 and shape[0] == 0) or shape[dim] == 0


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


@register_lowering(aten.slice_scatter)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    """x with `src` written over `x[start:end:step]` along `dim`, as Inductor lowers it: each
    element reads src where its position lies on the slice, x elsewhere."""
    out = ctx.out
    dim = norm_dim(dim, out.rank)
    size = out.shape[dim]
    start = clamp_start(start, size)
    last = start + step * (src.type.shape[dim] - 1)  # the slice's last position

    def body(b, idx):
        pos = idx[dim]
        on = in_range(b, b.index(pos), start, last + 1, size)
        if step != 1:
            hit = b.eq(b.index(Mod(pos - start, step)), b.constant(0, dt.i64))
            on = hit if on is None else b.logical_and(on, hit)
        index = [*idx[:dim], sympy.floor((pos - start) / step), *idx[dim + 1 :]]
        written = b.cast(masked_load(b, src, index, on), out.dtype)
        if on is None:
            return written
        return b.where(on, written, b.cast(b.load(x, idx), out.dtype))

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.diagonal_scatter)
def diagonal_scatter(ctx, x, src, offset=0, dim1=0, dim2=1):
    """x with `src` written over its diagonal (`src`'s last dim runs along it), as Inductor
    lowers it: each element reads src where it lies on the diagonal, x elsewhere."""
    out = ctx.out
    d1, d2 = norm_dim(dim1, out.rank), norm_dim(dim2, out.rank)

    def body(b, idx):
        i, j = idx[d1], idx[d2]
        on = b.eq(b.index(j - i), b.constant(offset, dt.i64))
        rest = [e for k, e in enumerate(idx) if k not in (d1, d2)]
        written = masked_load(b, src, [*rest, i if offset >= 0 else j], on)
        return b.where(on, b.cast(written, out.dtype), b.cast(b.load(x, idx), out.dtype))

    return ctx.pointwise(out.dtype, out.shape, body)
