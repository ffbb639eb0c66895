"""Which way a scheduled node's memory accesses run: the step an index takes along one loop
variable, and whether a reduction reads contiguously along r (inner) or along x (outer, a column
sum). Code generation tiles by it; split-reductions and fuse split by it."""

from __future__ import annotations

import re
from functools import lru_cache

import sympy
from mind.analysis.loops import EXPR_CACHE_SIZE, INDIRECT, linear_coefficients, pvar, pvars
from mind.dialects.loops import Index, Load
from mind.dialects.scheduled import Store
from mind.ir.core import Operation, Value
from mind.ir.symbols import sym


def moves_along(op: Load | Store | Index) -> frozenset[sympy.Symbol]:
    """The loop variables an access's index moves along: its own, and for each indirect symbol
    (`i0`: a value read from memory, such as an embedding's token id) those the value is
    computed from, so that a gathered row moves along the x dims its ids are read at."""
    expr = sympy.sympify(op.index)
    found = {s for s in expr.free_symbols if not INDIRECT.fullmatch(s.name)}
    for k, value in enumerate(getattr(op, "indirect", None) or []):
        if sym(f"i{k}") in expr.free_symbols:
            found |= _value_vars(value)
    return frozenset(found)


def _value_vars(value: Value) -> set[sympy.Symbol]:
    """The loop variables a scalar of a node's body is computed from: those of the loads and
    index ops it derives from, through the ops of the same body (each value visited once)."""
    block = value.owner.parent if isinstance(value.owner, Operation) else None
    found: set[sympy.Symbol] = set()
    seen, todo = set(), [value]
    while todo:
        op = todo.pop().owner
        if not isinstance(op, Operation) or op.parent is not block or op in seen:
            continue
        seen.add(op)
        if isinstance(op, Load | Index):
            found |= moves_along(op)
        else:
            todo.extend(op.operands)
    return found


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def unit_stride(expr: sympy.Expr, dim: int) -> bool:
    """Whether stepping p<dim> steps `expr` by one element. Where `expr` is not linear in it (a
    reshape's floor and Mod, a cat's offsets), the step from the origin decides, as Inductor's
    stride hints do: `Mod(p1, 64) + 384*floor(p1/384)` steps by one. Coalescing asks what
    neighbouring lanes touch, so this is the local step, not analysis.layouts' mean step over
    the loop's range (0.72 here, for 1152 columns), which orders dims by how far they travel."""
    var = pvar(dim)
    linear = linear_coefficients(expr, (var,))
    if linear is not None:
        return linear[var] == 1
    origin = {s: 0 for s in expr.free_symbols if re.fullmatch(r"p\d+", s.name)}
    return expr.xreplace({**origin, var: 1}) - expr.xreplace(origin) == 1


def is_inner(node: Operation) -> bool:
    """Whether a reduction reads contiguously along r (else along x: a column sum). The accesses
    that move along both the innermost x dim and r carry the traffic, and they decide by
    majority; one the same along that x dim, such as the per-row mean a layer norm's weight
    gradient reads, is reused across the tile's x axis from cache, and counts only where no
    access moves along both. A tie of accesses contiguous each way (a transpose: BERT's key
    gradient read along r, stored along x) is outer, whose tile spans both axes; an inner tile
    is one row wide, so its stores along x would each fill a memory sector of their own."""
    nx, nr = (len(s) for s in node.sizes)
    if not nx:
        return True
    rs = set(pvars(nx, nr))
    ops = [op for op in node.body.ops if isinstance(op, Load | Store)]
    found = [sympy.sympify(op.index) for op in ops]
    along = [moves_along(op) for op in ops]
    both = [e for e, vs in zip(found, along) if pvar(nx - 1) in vs and vs & rs] or found
    inner = sum(unit_stride(e, nx + nr - 1) for e in both)
    outer = sum(unit_stride(e, nx - 1) for e in both)
    return inner > outer or inner == outer == 0
