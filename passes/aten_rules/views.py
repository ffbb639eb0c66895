"""mind's rules for views at symbolic positions.

Under dynamic sizes an index, or a slice's start, may be a symbol (an int argument Dynamo makes
one: `x.select(1, i)`). torch's meta functions count a negative one from the end, guarding on its
sign, but the graph keeps the raw symbol, and mind's lowerings, which see only the IR, cannot
tell its sign: a select at index -1 read before the tensor's start, a select_scatter wrote there.
Here a negative symbol is made `i + size` in the graph (a host computation), under the guard the
meta function made, and a start past either end is clamped as the meta function clamps it.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

aten = torch.ops.aten


def _from_end(position: object, size: object) -> object | None:
    """`position + size` for a symbol that is negative (a guard Dynamo holds already), clamped at
    0 as a slice's start; None for a number, a symbol that is not negative, or one whose sign is
    data (`.item()`'s: no guard can tell it, and none is made)."""
    if not isinstance(position, torch.SymInt) or not guard_or_false(position < 0):
        return None
    position = position + size
    return 0 if guard_or_false(position < 0) else position


def _select(x: torch.Tensor, dim: int, index: object):
    wrapped = _from_end(index, x.shape[dim])
    return NotImplemented if wrapped is None else aten.select.int(x, dim, wrapped)


def _select_scatter(x: torch.Tensor, src: torch.Tensor, dim: int, index: object):
    wrapped = _from_end(index, x.shape[dim])
    return NotImplemented if wrapped is None else aten.select_scatter(x, src, dim, wrapped)


def _slice(x: torch.Tensor, dim: int = 0, start=None, end=None, step: int = 1):
    wrapped = _from_end(start, x.shape[dim])
    return NotImplemented if wrapped is None else aten.slice.Tensor(x, dim, wrapped, end, step)


def _slice_scatter(x: torch.Tensor, src: torch.Tensor, dim=0, start=None, end=None, step=1):
    wrapped = _from_end(start, x.shape[dim])
    if wrapped is None:
        return NotImplemented
    return aten.slice_scatter(x, src, dim, wrapped, end, step)


#: op overload -> mind's rule
RULES = {
    aten.select.int: _select,
    aten.select_scatter.default: _select_scatter,
    aten.slice.Tensor: _slice,
    aten.slice_scatter.default: _slice_scatter,
}
