"""Views as reinterpretations: a chain of views over a buffer that reads memory at
`offset + sum(stride_i * p_i)` is that buffer's memory with other sizes, strides and offset
(Inductor's ReinterpretView), so an extern call or a graph output can take it without a copy.

`realize` asks `view_layout` whether a view is such a chain; `schedule` and `to-triton` ask
`alias_of` what memory a `reinterpret` value stands for (its reads and its lifetime are the
buffer's); `to-triton` and `combo-kernels` ask `bases` what memory any value shares (a view's,
a scatter's in place, an ATen view's).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy
from mind.dialects.common import Reinterpret, aliased_memory
from mind.dialects.scheduled import Node
from mind.ir.core import Value
from mind.ir.symbols import IntLike, as_int_like
from mind.ir.types import TensorType, contiguous_strides

from .loops import EXPR_CACHE_SIZE, compose_view, linear_coefficients, pvar, simplify_index

Strides = tuple[IntLike, ...]


@dataclass(frozen=True)
class ViewLayout:
    """Where a view's element `[p0, ...]` lies: `offset + sum(strides[i] * p_i)` elements past
    its buffer's first element."""

    base: Value
    strides: Strides
    offset: IntLike


def view_layout(value: Value, base_strides: Strides) -> ViewLayout | None:
    """The layout of view chain `value` over the tensor underneath, laid out with
    `base_strides`; None when the chain is not affine in the p vars (a reshape that splits a
    non-contiguous dim, ...). Size-1 dims read index 0 only: they get contiguous strides."""
    t = value.type
    assert isinstance(t, TensorType)
    base, index, _ = compose_view(value, [pvar(i) for i in range(t.rank)])
    flat = simplify_index(sum((sympy.sympify(e) * s for e, s in zip(index, base_strides)), start=0))
    affine = _affine(sympy.sympify(flat), tuple(t.shape))
    return None if affine is None else ViewLayout(base, *affine)


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _affine(flat: sympy.Expr, shape: tuple[IntLike, ...]) -> tuple[Strides, IntLike] | None:
    """(strides, offset) when `flat`, over the p vars of a view of `shape`, is
    `offset + sum(strides[i] * p_i)`; else None."""
    ps = [pvar(i) for i in range(len(shape))]
    flat = _at_zero(flat, [p for p, n in zip(ps, shape) if n == 1])
    linear = linear_coefficients(flat, ps)  # most views: read off the terms, no calculus
    if linear is not None:
        strides = [_expanded(linear[p]) for p in ps]
        offset = _expanded(as_int_like(_at_zero(flat, ps)))
    else:
        flat = sympy.expand(flat)
        offset = _at_zero(flat, ps)
        strides = [sympy.expand(sympy.diff(flat, p)) for p in ps]
        if any(s.free_symbols & set(ps) or s.has(sympy.Derivative) for s in strides):
            return None
        if sympy.expand(offset + sum(s * p for s, p in zip(strides, ps)) - flat) != 0:
            return None
    unit = contiguous_strides(shape)
    strides = tuple(u if n == 1 else as_int_like(s) for s, u, n in zip(strides, unit, shape))
    return strides, as_int_like(offset)


def _at_zero(flat: sympy.Expr, ps: list[sympy.Symbol]) -> sympy.Expr:
    """`flat` with the p vars `ps` at 0, a sympy value even where `flat` is one of them
    (`xreplace` returns a replacement as given: `p0.xreplace({p0: 0})` is the int 0)."""
    return flat.xreplace(dict.fromkeys(ps, sympy.S.Zero))


def _expanded(value: IntLike) -> IntLike:
    return value if isinstance(value, int) else sympy.expand(value)


def alias_of(value: Value) -> tuple[Value, IntLike] | None:
    """(buffer, offset) for a `reinterpret` result (any dialect), through reinterprets of
    reinterprets to the memory underneath; None for any other value."""
    base, offset = value, 0
    while isinstance(base.owner, Reinterpret):
        base, offset = base.owner.buffer, offset + base.owner.offset
    return None if base is value else (base, as_int_like(offset))


def memory_of(value: Value) -> list[Value]:
    """The buffers whose memory `value` is: a reinterpret's, the one a node updates in place (a
    scatter's target), or the arguments of an extern call that may return one of them (a view
    ATen makes); none when `value` has memory of its own."""
    op = value.owner
    if isinstance(op, Reinterpret):
        return [op.buffer]
    if isinstance(op, Node):
        return [op.updates] if op.updates is not None else []
    return aliased_memory(value)


def bases(value: Value) -> set[Value]:
    """`value` and the buffers whose memory it is, through aliases of aliases."""
    found, stack = {value}, [value]
    while stack:
        for base in memory_of(stack.pop()):
            if base not in found:
                found.add(base)
                stack.append(base)
    return found
