"""When two scheduler nodes can share one loop nest, and how each maps onto it.

A node iterates `(x sizes, r sizes)`. Two nodes share a nest when their iterations have a common
refinement (`[4, 128]` and `[512]` both become `[4, 128]`, `[4, 128]` and `[8, 64]` become
`[4, 2, 64]`): every original loop is then a run of adjacent new loops and its variable a linear
combination of theirs. Like Inductor's SIMD scheduling, a pointwise node joins a reduction when
its numel is the reduction's x*r (it runs inside the r loop: prologue or softmax-style epilogue)
or its x numel (it runs once per row). A join may first cut and permute one node's x loops
(`Reorder`, chosen by analysis/loop_order.py): its loop variables then map onto the shared nest
through the pieces and the permutation. A matmul template's loops stay as its code tiles them
(`keeping`): the node it joins reads its variables off them by floor and mod.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from mind.ir.symbols import IntLike, Mod

from .deps import equal, product
from .loops import pvar, substitute

Sizes = tuple[list[IntLike], list[IntLike]]
Mapping = dict[sympy.Symbol, IntLike]


@dataclass(frozen=True)
class Reorder:
    """One node's x loops cut and permuted: `sizes` are its x loops cut in pieces (each loop a
    run of adjacent pieces; no cut, its x sizes), and new loop k is piece `order[k]`. `node` is
    0 for the first node of a join, 1 for the second."""

    node: int
    sizes: tuple[IntLike, ...]
    order: tuple[int, ...]

    def describe(self, sizes: Sizes) -> str:
        """How the node iterating `sizes` was changed, for a remark."""
        cut = f"cut to {list(self.sizes)} and " if list(self.sizes) != list(sizes[0]) else ""
        return cut + "reordered to (" + ", ".join(f"p{k}" for k in self.order) + ")"


@dataclass(frozen=True)
class Join:
    """The shared iteration and, for each node, its old loop variables in terms of the new (through
    `reorder`'s permutation, when there is one)."""

    sizes: Sizes
    first: Mapping
    second: Mapping
    reorder: Reorder | None = None


def refine(a: list[IntLike], b: list[IntLike]) -> list[IntLike] | None:
    """The coarsest loop list that both `a` and `b` are groupings of, or None (also for loops of
    no elements: any grouping of a 0 fits, and no cut of one is the right one)."""
    if a == b:
        return list(a)
    if not all(isinstance(s, int) for s in a + b) or product(a) != product(b) or 0 in a + b:
        return None
    cuts = sorted({*_cumulative(a), *_cumulative(b)})
    if any(hi % lo for lo, hi in zip(cuts, cuts[1:])):
        return None
    return [hi // lo for lo, hi in zip([1, *cuts], cuts)]


def _cumulative(sizes: list[int]) -> list[int]:
    out, running = [], 1
    for s in sizes:
        running *= s
        out.append(running)
    return out


def coarsen(old: list[IntLike], new: list[IntLike], offset: int, first: int = 0) -> Mapping:
    """Old loop variables `p{first}..` as combinations of the new ones `p{offset}..`; each old
    loop is a run of adjacent new loops (the caller made `new` a refinement of `old`)."""
    mapping: Mapping = {}
    j = 0
    for k, size in enumerate(old):
        run = [j]
        while not equal(product(new[run[0] : run[-1] + 1]), size):
            assert run[-1] + 1 < len(new), f"{new} does not refine {old}"
            run.append(run[-1] + 1)
        expr = sympy.Integer(0)
        for i in run:
            expr += pvar(offset + i) * sympy.Mul(*new[i + 1 : run[-1] + 1])
        mapping[pvar(first + k)] = expr
        j = run[-1] + 1
    return mapping


def _split(full: list[IntLike], x_numel: IntLike) -> tuple[list[IntLike], list[IntLike]] | None:
    for k in range(len(full) + 1):
        if equal(product(full[:k]), x_numel):
            return full[:k], full[k:]
    return None


def _onto(sizes: Sizes, xs: list[IntLike], rs: list[IntLike]) -> Mapping:
    """A node's (x, r) loops onto a refinement (xs, rs) that keeps the x/r boundary."""
    old_x, old_r = sizes
    return {**coarsen(old_x, xs, 0), **coarsen(old_r, rs, len(xs), len(old_x))}


def join(a: Sizes, b: Sizes, reorder: Reorder | None = None) -> Join | None:
    """The iteration nodes `a` and `b` can share (`reorder` permuting one's x loops first), or None
    when they cannot."""
    if reorder is not None:
        return _join_reordered(a, b, reorder)
    if bool(a[1]) == bool(b[1]):
        xs, rs = refine(a[0], b[0]), refine(a[1], b[1])
        if xs is None or rs is None:
            return None
        return Join((xs, rs), _onto(a, xs, rs), _onto(b, xs, rs))
    red, pw = (a, b) if a[1] else (b, a)
    (rx, rr), px = red, pw[0]
    full = refine(rx + rr, px)
    parts = _split(full, product(rx)) if full is not None else None
    if parts is not None:
        xs, rs = parts
        maps = _onto(red, xs, rs), coarsen(px, full, 0)
    else:
        xs = refine(rx, px)
        if xs is None:
            return None
        rs = rr
        maps = _onto(red, xs, rs), coarsen(px, xs, 0)
    first, second = maps if red is a else maps[::-1]
    return Join((xs, rs), first, second)


def keeping(a: Sizes, b: Sizes, keep: int) -> Join | None:
    """The join over node `keep`'s own loops, unchanged (a matmul template's: its code tiles them
    as they are), of it and a node of no reduction loops and its x numel, or None. Where the
    kept loops and the other's differ (a [2048, 768] matmul, a GELU over its [8, 256, 768]
    view), the other's variables are read off the kept ones: a kept loop cut into the other's
    pieces gives each piece by floor and mod."""
    kept, other = (a, b)[keep], (a, b)[1 - keep]
    xs, rs = kept
    pieces = refine(xs, other[0]) if not other[1] else None
    if pieces is None:
        return None
    piece_vars: Mapping = {}
    start = 0
    for k, size in enumerate(xs):
        stop = start
        while not equal(product(pieces[start : stop + 1]), size):
            stop += 1
        for i in range(start, stop + 1):
            expr = sympy.floor(pvar(k) / product(pieces[i + 1 : stop + 1]))
            piece_vars[pvar(i)] = Mod(expr, pieces[i]) if i > start else expr
        start = stop + 1
    own = {pvar(i): pvar(i) for i in range(len(xs) + len(rs))}
    read = {v: substitute(e, piece_vars) for v, e in coarsen(other[0], pieces, 0).items()}
    return Join(kept, *((own, read) if keep == 0 else (read, own)))


def _join_reordered(a: Sizes, b: Sizes, reorder: Reorder) -> Join | None:
    sizes = [a, b]
    xs, rs = sizes[reorder.node]
    pieces = list(reorder.sizes)
    sizes[reorder.node] = ([pieces[k] for k in reorder.order], rs)
    shared = join(*sizes)
    if shared is None:
        return None
    maps = [shared.first, shared.second]
    onto = maps[reorder.node]  # the cut, permuted loops' variables onto the shared nest
    piece = {pvar(k): onto[pvar(new)] for new, k in enumerate(reorder.order)}
    old = {v: substitute(e, piece) for v, e in coarsen(xs, pieces, 0).items()}
    old |= {pvar(len(xs) + k): onto[pvar(len(pieces) + k)] for k in range(len(rs))}
    maps[reorder.node] = old
    return Join(shared.sizes, maps[0], maps[1], reorder)
