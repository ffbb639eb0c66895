"""Views: `loops.view` nodes that own no memory, only an index map from the result's loop
variables to the source's dims (reshape, permute, expand, slice, select, squeeze, ...)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import sympy
import torch
from mind.ir.core import Operation, Value
from mind.ir.symbols import IntLike, Mod
from mind.ir.types import TensorType

from . import Unsupported, register_lowering
from .common import Index, broadcast_index, is_tensor, norm_dim, pvars

aten = torch.ops.aten


def _unflatten(flat: IntLike, sizes: Sequence[IntLike], strides: Sequence[IntLike]) -> Index:
    """The index along each dim whose element `flat` is, for dims ordered outermost first. Dims
    of an empty tensor (a size 0) index nothing, and splitting over a size of 0 would divide by
    it: zeros (the stack of two tensors of shape (0, 1, 0) reshapes one)."""
    if 0 in sizes:
        return [sympy.Integer(0)] * len(sizes)
    index: Index = []
    for k, (size, stride) in enumerate(zip(sizes, strides)):
        e = sympy.floor(flat / stride) if stride != 1 else flat
        index.append(e if k == 0 else Mod(e, size))
    return index


def _groups(src: Sequence[IntLike], out: Sequence[IntLike]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of source dims with runs of result dims of equal element count (size-1 dims
    excluded); symbolic sizes that do not match one to one make a single group."""
    si = [k for k, s in enumerate(src) if s != 1]
    oi = [k for k, s in enumerate(out) if s != 1]
    groups, a, c = [], 0, 0
    while a < len(si) and c < len(oi):
        gs, go = [si[a]], [oi[c]]
        ps, po = src[si[a]], out[oi[c]]
        a, c = a + 1, c + 1
        while sympy.simplify(ps - po) != 0:
            if not (isinstance(ps, int) and isinstance(po, int)):
                return [(si, oi)]
            if ps < po and a < len(si):
                gs.append(si[a])
                ps, a = ps * src[si[a]], a + 1
            elif po < ps and c < len(oi):
                go.append(oi[c])
                po, c = po * out[oi[c]], c + 1
            else:
                return [(si, oi)]
        groups.append((gs, go))
    if a < len(si) or c < len(oi):
        return [(si, oi)]
    return groups


def _strides(sizes: Sequence[IntLike]) -> list[IntLike]:
    return [math.prod(sizes[k + 1 :]) for k in range(len(sizes))]


def reshape_index(src: Sequence[IntLike], out: Sequence[IntLike], idx: Index) -> Index:
    """The source index of a reshape, group by group: flatten the result dims of a group and
    split the flat position over its source dims."""
    index: Index = [0] * len(src)
    for gs, go in _groups(src, out):
        osizes = [out[k] for k in go]
        flat = sum((idx[k] * s for k, s in zip(go, _strides(osizes))), sympy.Integer(0))
        ssizes = [src[k] for k in gs]
        for k, e in zip(gs, _unflatten(flat, ssizes, _strides(ssizes))):
            index[k] = e
    return index


def _view(ctx, x, index_fn):
    shape = ctx.out.shape
    return ctx.view(x, shape, index_fn(pvars(0, len(shape))))


@register_lowering(
    aten.view.default, aten.reshape, aten._unsafe_view, aten.squeeze, aten.unsqueeze, aten.flatten
)
def reshape(ctx, x, *args, **kwargs):
    src, out = x.type.shape, ctx.out.shape
    return _view(ctx, x, lambda idx: reshape_index(src, out, idx))


@register_lowering(aten.alias)
def alias(ctx, x):
    return _view(ctx, x, lambda idx: idx)


@register_lowering(aten.permute)
def permute(ctx, x, dims):
    rank = x.type.rank
    dims = [norm_dim(d, rank) for d in dims]

    def index(idx):
        src: Index = [0] * rank
        for i, d in enumerate(dims):
            src[d] = idx[i]
        return src

    return _view(ctx, x, index)


@register_lowering(torch.ops.prims.rev)
def rev(ctx, x, dims):
    """Reversed along `dims` (`flip` decomposes to it): element i reads size - 1 - i."""
    shape, rank = x.type.shape, x.type.rank
    dims = {norm_dim(d, rank) for d in dims}
    return _view(
        ctx, x, lambda idx: [shape[k] - 1 - e if k in dims else e for k, e in enumerate(idx)]
    )


@register_lowering(aten.transpose.int)
def transpose(ctx, x, d0, d1):
    dims = list(range(x.type.rank))
    if dims:
        d0, d1 = norm_dim(d0, len(dims)), norm_dim(d1, len(dims))
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(ctx, x, dims)


@register_lowering(aten.t)
def t(ctx, x):
    return permute(ctx, x, list(range(x.type.rank))[::-1])


@register_lowering(aten.expand)
def expand(ctx, x, size, *, implicit=False):
    return _view(ctx, x, lambda idx: broadcast_index(x.type.shape, idx))


@register_lowering(aten.unfold)
def unfold(ctx, x, dim, size, step):
    """Windows of `size` every `step` along `dim`, in a new last dim: element (.., i, .., j)
    reads the source at i * step + j along `dim`. A view, as in eager: a matmul over windows
    gathers them through it (a stem convolution, passes/aten_rules/convolution.py)."""
    if x.type.rank == 0:
        raise Unsupported("unfold of a 0-d tensor")
    dim = norm_dim(dim, x.type.rank)

    def index(idx):
        src = list(idx[:-1])
        src[dim] = step * idx[dim] + idx[-1]
        return src

    return _view(ctx, x, index)


def _slice_index(x, dim: int, start, step):
    def index(idx):
        src = list(idx)
        src[dim] = start + step * idx[dim]
        return src

    return index


def clamp_start(start, size) -> IntLike:
    """A slice start in [0, size]; symbolic sizes trust the guards that start is in range."""
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        start = start + size
    if isinstance(start, int) and isinstance(size, int):
        return min(max(start, 0), size)
    return start


@register_lowering(aten.slice.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    if isinstance(start, Value):
        raise Unsupported("slice from a start read from data (`.item()`)")
    dim = norm_dim(dim, x.type.rank)
    start = clamp_start(start, x.type.shape[dim])
    return _view(ctx, x, _slice_index(x, dim, start, step))


@register_lowering(aten.select.int)
def select(ctx, x, dim, index):
    if isinstance(index, Value):  # a view at a position known only at run time: ATen's
        raise Unsupported("select at an index read from data (`.item()`)")
    dim = norm_dim(dim, x.type.rank)
    if isinstance(index, int) and index < 0:
        index += x.type.shape[dim]
    return _view(ctx, x, lambda idx: [*idx[:dim], index, *idx[dim:]])


@register_lowering(aten.split, aten.split_with_sizes)
def split(ctx, x, sizes, dim=0):
    """Consecutive slices along `dim`, one per result."""
    dim = norm_dim(dim, x.type.rank)
    views, start = [], 0
    for t in ctx.outs:
        shape = t.shape
        views.append(ctx.view(x, shape, _slice_index(x, dim, start, 1)(pvars(0, len(shape)))))
        start += shape[dim]
    return views


@register_lowering(aten.unbind)
def unbind(ctx, x, dim=0):
    dim = norm_dim(dim, x.type.rank)
    idx = pvars(0, x.type.rank - 1)
    return [ctx.view(x, t.shape, [*idx[:dim], k, *idx[dim:]]) for k, t in enumerate(ctx.outs)]


def storage_index(t: TensorType, flat: IntLike) -> Index:
    """The index of the element at position `flat` of the memory of a tensor of type `t`: its
    dims in stride order split the position. Only for a dense layout (Unsupported else)."""
    if t.strides is None or any(not isinstance(s, int) for s in t.strides):
        raise Unsupported("a strided view of a tensor without a known layout")
    order = sorted(range(t.rank), key=lambda k: -t.strides[k])
    sizes = [t.shape[k] for k in order]
    if [t.strides[k] for k in order] != _strides(sizes):
        raise Unsupported("a strided view of a layout with gaps")
    index: Index = [0] * t.rank
    for k, e in zip(order, _unflatten(flat, sizes, _strides(sizes))):
        index[k] = e
    return index


def strided_position(idx: Index, stride: Sequence[IntLike], storage_offset) -> IntLike:
    """The memory position `as_strided(size, stride, storage_offset)` reads at `idx` (the offset
    a number or, where sizes are dynamic, a symbol)."""
    offset = sympy.sympify(0 if storage_offset is None else storage_offset)
    return sum((e * s for e, s in zip(idx, stride)), offset)


@register_lowering(aten.as_strided)
def as_strided(ctx, x, size, stride, storage_offset=None):
    """Only over a buffer with a dense layout: the flat position is split over the buffer's
    dims in stride order."""
    if not is_tensor(x):
        raise Unsupported("as_strided of a tensor without a known layout")
    if not isinstance(x.owner, Operation):
        # eager counts storage_offset from the start of the input's storage, which may begin
        # before the input (a caller's slice); types carry no storage offset: ATen runs it
        raise Unsupported("as_strided of a graph input")
    return _view(
        ctx, x, lambda idx: storage_index(x.type, strided_position(idx, stride, storage_offset))
    )
