"""Which order of a node's loops lines its accesses up with another node's: Inductor's loop
reordering for fusion (`loop_ordering_after_fusion`, `reorder_loops_by_dep_pair`).

Two nodes over the same elements may visit them in different orders. A column softmax's
reductions run x over the columns and r over the rows, while its pointwise part runs the rows
outside the columns: as they are, they share no loop nest. They do once the pointwise node's loops
are permuted. A buffer both nodes touch says how: where both index it linearly, each loop of the
node to permute pairs with the other node's loop that steps the buffer by the same stride over as
many elements (a loop of one side may be several of the other's: both are cut where the other's
strides fall inside them); a loop that does not move through the buffer (a broadcast, or the
rows of a reduction's stored result) takes the place of the other's loops that do not either.
A node whose one loop covers several dims (a flat view of them, read through `Mod(p0, 16)`) is
first cut where its indexes take the loop apart (Inductor reindexes such a node to match a
reduction: `loop_reindexing_after_fusion`). Each buffer both touch proposes one order; the caller
checks each as any join (analysis/iteration.py, the index rule of passes/fuse.py) and, of the
legal ones, keeps the one whose accesses are most often contiguous along the innermost loop.

Only nodes without r loops are permuted (reordering a reduction's loops would change the order
it combines in), as in Inductor, and not matmul templates, whose loops are their tiling.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import sympy
from mind.dialects.loops import Load
from mind.dialects.scheduled import Node, Store
from mind.ir.core import Value
from mind.ir.symbols import IntLike, as_int_like, size_hint

from .deps import equal, index_ops, product
from .iteration import Join, Reorder, coarsen
from .loops import (
    EXPR_CACHE_SIZE,
    linear_coefficients,
    pvar,
    simplify_with_ranges,
    substitute,
)

#: a buffer access in a node's body: the buffer, the flat index, whether it stores
Access = tuple[Value, IntLike, bool]


def accesses(node: Node) -> list[Access]:
    """The node's loads and stores, each distinct one once."""
    found = [
        (op.source, op.index, False) if isinstance(op, Load) else (op.buffer, op.index, True)
        for op in node.body.ops
        if isinstance(op, Load | Store)
    ]
    return list(dict.fromkeys(found))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def strides(index: IntLike, count: int) -> tuple[IntLike, ...] | None:
    """The stride of each loop variable `p0..` in `index`, or None where `index` is not linear in
    them (a floor or Mod of a loop variable, a product of two). Memoized: fuse asks it of the
    same accesses for every pair and every buffer they share."""
    variables = [pvar(k) for k in range(count)]
    coeffs = linear_coefficients(index, variables)
    return None if coeffs is None else tuple(coeffs[v] for v in variables)


#: a loop as an access sees it: the stride it steps the buffer by, and its size
Dim = tuple[IntLike, IntLike]


def matching_order(
    sizes: list[IntLike], index: IntLike, other_sizes: list[IntLike], other_index: IntLike
) -> tuple[int, ...] | None:
    """The order of loops `sizes` (reading a buffer at `index`) that visits the buffer as loops
    `other_sizes` do at `other_index`, or None when the strides do not pair the loops up.

    One side's loop may be several of the other's (`[2, 8, 64]` row-major against the same
    buffer seen as `[64]` columns and `[16]` rows): both sides' loops are cut where the other
    side's strides fall inside them, and the pieces pair up by stride and size."""
    mine, theirs = strides(index, len(sizes)), strides(other_index, len(other_sizes))
    if mine is None or theirs is None:
        return None
    dims, other_dims = list(zip(mine, sizes)), list(zip(theirs, other_sizes))
    pieces, other_pieces = _cut(dims, other_dims), _cut(other_dims, dims)
    where = [
        (d, (j, i)) for j, ps in enumerate(other_pieces) for i, d in enumerate(ps) if d[0] != 0
    ]
    position: dict[int, tuple] = {}
    for k, ps in enumerate(pieces):
        if ps[0][0] != 0:
            found = [at for d, at in where if equal(d[0], ps[0][0]) and equal(d[1], ps[0][1])]
            if len(found) != 1:
                return None
            position[k] = found[0]
    # loops that do not move through the buffer: into the other side's such loops, in order
    free = [j for j, (t, _) in enumerate(other_dims) if t == 0] + [len(other_dims)]
    for k in (k for k in range(len(sizes)) if k not in position):
        position[k] = (free[0], k)
        if len(free) > 1 and equal(sizes[k], other_sizes[free[0]]):
            free.pop(0)
    return tuple(sorted(range(len(sizes)), key=position.__getitem__))


def _cut(dims: list[Dim], other: list[Dim]) -> list[list[Dim]]:
    """Each loop of `dims` as pieces (outer first), cut where a stride of `other` (or the end of
    one of its loops) falls strictly inside it."""
    points = [p for t, m in other if t != 0 for p in (t, t * m)]
    out = []
    for dim in dims:
        pieces, k = [dim], 0
        while k < len(pieces):
            split = next((s for p in points if (s := _split(pieces[k], p))), None)
            if split is None:
                k += 1
            else:
                pieces[k : k + 1] = split
        out.append(pieces)
    return out


def _split(dim: Dim, point: IntLike) -> list[Dim] | None:
    """`dim` as an outer and an inner loop, the outer one stepping by `point`, when `point` is a
    multiple of its stride strictly inside it."""
    stride, size = dim
    if stride == 0:
        return None
    if type(stride) is int and type(size) is int and type(point) is int:  # no sympy for ints
        inner, rest = divmod(point, stride)
        outer, left = divmod(size, inner) if inner > 0 and not rest else (0, 1)
        if left or outer <= 1 or inner == 1:
            return None
        return [(point, outer), (stride, inner)]
    inner = sympy.sympify(point) / stride
    outer = sympy.sympify(size) / inner
    if not (_whole(inner) and _whole(outer)) or equal(inner, 1) or equal(outer, 1):
        return None
    return [(as_int_like(point), as_int_like(outer)), (stride, as_int_like(inner))]


def _whole(expr: sympy.Expr) -> bool:
    """A positive whole number, or a product of size symbols (no division left)."""
    if expr.is_Number:
        return bool(expr.is_Integer and expr > 0)
    return sympy.fraction(expr)[1] == 1


def permutable(node: Node) -> bool:
    return not node.sizes[1] and node.template is None


def reorders(a: Node, b: Node) -> Iterator[Reorder]:
    """The ways to cut and permute `b`'s loops, then `a`'s, that the buffers both touch propose:
    a buffer one stores and the other loads first, then buffers both load, larger first; each
    distinct one once, the identity never."""
    seen: set[Reorder] = set()
    for which, mine, other in ((1, b, a), (0, a, b)):
        if not permutable(mine):
            continue
        cut, on_pieces = pieces(mine)
        theirs = accesses(other)
        pairs = [(x, y) for x in on_pieces for y in theirs if x[0] is y[0]]
        pairs.sort(key=lambda p: (not (p[0][2] or p[1][2]), -_numel(p[0][0])))
        other_sizes = [*other.sizes[0], *other.sizes[1]]
        for (_, index, _), (_, other_index, _) in pairs:
            order = matching_order(cut, index, other_sizes, other_index)
            reorder = Reorder(which, tuple(cut), order) if order is not None else None
            if reorder is not None and order != tuple(sorted(order)) and reorder not in seen:
                seen.add(reorder)
                yield reorder


def pieces(node: Node) -> tuple[list[IntLike], list[Access]]:
    """A node's x loops cut where its indexes take a loop apart (`Mod(p0, 16)`, `floor(p0/16)`:
    one flat loop over several dims, a view's doing), and its accesses over the pieces."""
    xs = node.sizes[0]
    found = [_cut_points(node, pvar(k), size) for k, size in enumerate(xs)]
    cut = [s for size, points in zip(xs, found) for s in _piece_sizes(size, points)]
    if len(cut) == len(xs):
        return list(xs), accesses(node)
    mapping = coarsen(xs, cut, 0)
    ranges = {pvar(k): s for k, s in enumerate(cut)}
    return cut, [
        (v, simplify_with_ranges(substitute(i, mapping), ranges), store)
        for v, i, store in accesses(node)
    ]


def _cut_points(node: Node, var: sympy.Symbol, size: IntLike) -> list[IntLike]:
    """Where the node's indexes take loop `var` apart: the m of each `Mod(var + ..., m)`, the c
    of each `floor(var/c + ...)`, c*m for `Mod(floor(var/c), m)`, each dividing `size`."""
    points = [p for op in index_ops(node.body.ops) for p in _index_cut_points(op.index, var)]
    return [
        p
        for p in dict.fromkeys(points)
        if _whole(p) and _whole(size / p) and not (equal(p, 1) or equal(p, size))
    ]


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _index_cut_points(index: IntLike, var: sympy.Symbol) -> tuple[IntLike, ...]:
    """`_cut_points` of one index, memoized: a node's indexes are asked for each pair it is in,
    and a model's repeated layers repeat them."""
    points: list[IntLike] = []
    for term in sympy.sympify(index).atoms(sympy.Mod, sympy.floor):
        inner, outer = term.args[0], term.args[1] if isinstance(term, sympy.Mod) else 1
        if isinstance(inner, sympy.floor):
            inner = inner.args[0]
        step = sympy.expand(inner).coeff(var)
        if step != 0 and not step.free_symbols & {var}:
            points += [1 / step, outer / step]
    return tuple(points)


def _piece_sizes(size: IntLike, points: list[IntLike]) -> list[IntLike]:
    """`size` cut at `points` (each dividing the next, once sorted), outer first; uncut where they
    do not chain."""
    chain = sorted(points, key=size_hint)
    if any(not _whole(hi / lo) for lo, hi in zip(chain, chain[1:])) or not chain:
        return [size]
    bounds = [1, *chain, size]
    return [as_int_like(hi / lo) for lo, hi in reversed(list(zip(bounds, bounds[1:])))]


def _numel(value: Value) -> int:
    return size_hint(product(list(value.type.shape)))


def contiguous_bytes(a: Node, b: Node, shared: Join) -> int:
    """Bytes of the fused node's memory accesses (one element each; `b`'s loads of what `a`
    stores read no memory) that step by 1 along its innermost loop: what a reordering should
    keep coalesced."""
    xs, rs = shared.sizes
    innermost = pvar(len(xs) + len(rs) - 1)
    total = 0
    for node, mapping in ((a, shared.first), (b, shared.second)):
        for buffer, index, store in accesses(node):
            if node is b and not store and buffer in a.results:
                continue
            step = sympy.sympify(substitute(index, mapping)).coeff(innermost)
            total += buffer.type.dtype.itemsize if step == 1 else 0
    return total
