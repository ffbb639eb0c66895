"""Which way a scheduled node's memory accesses run: the step an index takes along one loop
variable, and whether a reduction reads contiguously along r (inner) or along x (outer, a column
sum). Code generation tiles by it; split-reductions and fuse split by it."""

from __future__ import annotations

import re
from functools import lru_cache

import sympy
from mind.analysis.loops import EXPR_CACHE_SIZE, linear_coefficients, pvar, pvars
from mind.dialects.loops import Load
from mind.dialects.scheduled import Store
from mind.ir.core import Operation


def accesses(node: Operation) -> list[sympy.Expr]:
    """The indices of a node's loads and stores."""
    return [sympy.sympify(op.index) for op in node.body.ops if isinstance(op, Load | Store)]


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
    found = accesses(node)
    both = [e for e in found if pvar(nx - 1) in e.free_symbols and e.free_symbols & rs]
    both = both or found
    inner = sum(unit_stride(e, nx + nr - 1) for e in both)
    outer = sum(unit_stride(e, nx - 1) for e in both)
    return inner > outer or inner == outer == 0
