"""Index algebra of scheduled nodes: Inductor's MemoryDeps and its loop merging.

A MemoryDep `(%buf0, 128*d0 + d1, {d0: 4, d1: 128})` says which buffer a node touches, at which
flat index, over which variable ranges. Reads range over all the node's loops (x then r); a
store whose index uses no r variable (a reduction's result) ranges over the x loops only.
`merge_dims` is Inductor's `_simplify_loops` with reordering prevented: adjacent dims fuse into
one when every index sees them as one contiguous range.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache

import sympy
from mind.dialects.loops import Index, Load
from mind.dialects.scheduled import Node, Store
from mind.ir.core import Block, Operation, Value
from mind.ir.symbols import IntLike, as_int_like, sym
from mind.ir.types import TensorType

from .loops import EXPR_CACHE_SIZE, INDIRECT, linear_coefficients, pvar, strides_of, substitute

Dep = tuple[Value, IntLike, dict[str, IntLike]]
Dim = tuple[sympy.Symbol, IntLike]

#: body ops whose `index` field holds an index expression over the loop variables
INDEXED = (Load, Store, Index)
#: the order of a scheduled.node's attributes, as docs/IR.md prints them
NODE_ATTRS = ("sizes", "device", "origins", "updates", "writes", "unmet", "met")


def index_ops(body: list[Operation]) -> Iterator[Load | Store | Index]:
    return (op for op in body if isinstance(op, INDEXED))


def reads(op: Operation) -> list[Value]:
    """The graph values an op reads: a node's loaded buffers and the buffer it updates in place,
    a call's or output's operands (not the op's own results, which its MemoryDeps name)."""
    if isinstance(op, Node):
        values = [b.source for b in op.body.ops if isinstance(b, Load)]
        values += [op.updates] if op.updates is not None else []
    else:
        values = [v for v in op.operands if v.owner is not op]
    return list(dict.fromkeys(values))


def erase_dead(body: Block) -> None:
    """Erase the body ops whose results nothing uses (bodies are pure; stores stay)."""
    for op in reversed(list(body.ops)):
        if op.results and not any(r.users for r in op.results):
            op.erase()


def readers(value: Value, block: Block) -> set[Operation]:
    """The ops of `block` that read `value` (not the op producing it)."""
    found = {user.ancestor_in(block) for user in value.users}
    return found - {None, value.owner}


def equal(a: IntLike, b: IntLike) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return _equal(sympy.sympify(a), sympy.sympify(b))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    return sympy.expand(a - b) == 0


def product(sizes: list[IntLike]) -> IntLike:
    if all(isinstance(s, int) for s in sizes):
        return math.prod(sizes)
    return as_int_like(sympy.Mul(*sizes))


# -- MemoryDeps --------------------------------------------------------------------------------
def _dep(buffer: Value, index: IntLike, ranges: list[IntLike]) -> Dep:
    """A dep over `ranges`, with the body's p vars renamed d vars."""
    renamed = substitute(index, {pvar(k): sym(f"d{k}") for k in range(len(ranges))})
    return (buffer, renamed, {f"d{k}": s for k, s in enumerate(ranges)})


def buffer_dep(value: Value) -> Dep:
    """A whole buffer, as an extern call reads or writes it: its layout over its own dims."""
    t = value.type
    assert isinstance(t, TensorType)
    index = sum((pvar(k) * s for k, s in enumerate(strides_of(value))), start=sympy.Integer(0))
    return _dep(value, as_int_like(index), list(t.shape))


def is_external(value: Value) -> bool:
    """Graph inputs and constants: reads of them are met before the graph runs."""
    owner = value.owner
    return not isinstance(owner, Operation) or owner.name.endswith(".constant_tensor")


def unique(deps: list[Dep]) -> list[Dep]:
    seen: list[Dep] = []
    for dep in deps:
        if dep not in seen:
            seen.append(dep)
    return seen


def split_reads(reads: list[tuple[Value, Dep]]) -> tuple[list[Dep], list[Dep]]:
    """(met, unmet): reads of graph inputs and constants, reads of other nodes' buffers."""
    met = unique([d for v, d in reads if is_external(v)])
    unmet = unique([d for v, d in reads if not is_external(v)])
    return met, unmet


def node_deps(op: Node) -> dict[str, list[Dep]]:
    """writes, unmet and met of a scheduled.node, computed from its body (and the buffer it
    updates in place: a scatter needs all of its target first)."""
    xs, rs = op.sizes
    r_vars = {pvar(len(xs) + k) for k in range(len(rs))}
    writes, loads = [], []
    for body_op in op.body.ops:
        if isinstance(body_op, Store):
            over_r = bool(sympy.sympify(body_op.index).free_symbols & r_vars)
            writes.append(_dep(body_op.buffer, body_op.index, xs + rs if over_r else xs))
        elif isinstance(body_op, Load):
            src = body_op.source
            loads.append((src, _dep(src, body_op.index, xs + rs)))
    if op.updates is not None:  # the whole buffer, before any of its elements is updated
        loads.append((op.updates, buffer_dep(op.updates)))
    met, unmet = split_reads(loads)
    own = set(op.results)  # its buffers' writes first, then the graph inputs it overwrites
    writes.sort(key=lambda dep: dep[0] not in own)
    return {"writes": writes, "unmet": unmet, "met": met}


def set_node_deps(op: Node) -> None:
    """Recompute a node's deps and put its attributes in their printed order."""
    attrs = {**op.attrs, **node_deps(op)}
    op.attrs = {k: attrs[k] for k in NODE_ATTRS if k in attrs} | {
        k: v for k, v in attrs.items() if k not in NODE_ATTRS
    }


# -- merging loops -----------------------------------------------------------------------------
_M1, _M2 = sym("merge_m1"), sym("merge_m2")


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _mergeable(index: IntLike, outer: sympy.Symbol, inner: sympy.Symbol, inner_size) -> bool:
    """Sound test: stepping `outer` once is stepping `inner` by its size, for any values (for a
    linear index: `outer`'s coefficient is `inner`'s times its size)."""
    if isinstance(index, int) or not index.free_symbols & {outer, inner}:
        return True
    linear = linear_coefficients(index, (outer, inner))
    if linear is not None:
        return equal(linear[outer], as_int_like(linear[inner] * inner_size))
    if _steps_apart(index, outer, inner, inner_size):
        return False
    split = index.xreplace({outer: _M1, inner: _M2})
    merged = index.xreplace({outer: sympy.Integer(0), inner: _M1 * inner_size + _M2})
    return equal(split, merged)


#: (outer, inner) values at which `_steps_apart` compares an index with its merged form
_SAMPLES = ((1, 0), (1, 1), (2, 3), (3, 5))


def _steps_apart(index: sympy.Expr, outer: sympy.Symbol, inner: sympy.Symbol, inner_size) -> bool:
    """Whether some integers show that stepping `outer` is not stepping `inner` by its size:
    the index at (outer, inner) differs from the index at (0, outer * inner_size + inner), the
    other symbols fixed. A counterexample settles `_mergeable` at the cost of evaluating numbers,
    where proving the general case expands a nonlinear index (Mod and floor of reshapes)."""
    others = sorted((index.free_symbols | sympy.sympify(inner_size).free_symbols) - {outer, inner},
                    key=sympy.default_sort_key)  # fmt: skip
    if not all(s.is_nonnegative for s in (*others, outer, inner)):
        return False  # (the samples are non-negative: they must lie where the symbols do)
    values = {s: sympy.Integer(3 + k) for k, s in enumerate(others)}
    size = _value_at(sympy.sympify(inner_size), values)
    for o, i in _SAMPLES if size is not None else ():
        split = _value_at(index, {**values, outer: sympy.Integer(o), inner: sympy.Integer(i)})
        merged = _value_at(index, {**values, outer: sympy.Integer(0), inner: o * size + i})
        if split is not None and merged is not None and split != merged:
            return True
    return False


def _value_at(expr: sympy.Expr, values: dict) -> sympy.Integer | None:
    """`expr` at these values; None where it is undefined there, which a sample of sizes can
    make it: a Mod, floor or division by a size expression that the sample makes 0 (sympy
    raises ZeroDivisionError, or gives zoo, which a Max or Min around it refuses with
    ValueError)."""
    try:
        value = expr.xreplace(values)
    except (ZeroDivisionError, ValueError):
        return None
    return value if value.is_Integer else None


def drop_unit_dims(indexes: list[IntLike], dims: list[Dim]) -> tuple[list[IntLike], list[Dim]]:
    """Size-1 loops iterate once: their variables are 0."""
    zero = {v: 0 for v, s in dims if s == 1}
    return [substitute(e, zero) for e in indexes], [(v, s) for v, s in dims if s != 1]


def merge_dims(indexes: list[IntLike], dims: list[Dim]) -> tuple[list[IntLike], list[Dim]]:
    """Merge adjacent dims (outer, inner) when every index allows it; the merged dim keeps the
    inner variable, which now counts `outer * inner_size + inner`."""
    indexes, dims = drop_unit_dims(indexes, dims)
    k = len(dims) - 1
    while k > 0:
        (outer, outer_size), (inner, inner_size) = dims[k - 1], dims[k]
        if all(_mergeable(e, outer, inner, inner_size) for e in indexes):
            indexes = [substitute(e, {outer: 0}) for e in indexes]
            dims[k - 1 : k + 1] = [(inner, as_int_like(outer_size * inner_size))]
        k -= 1
    return indexes, dims


def normalize_dep(dep: Dep) -> Dep:
    """Inductor's normalized MemoryDep: contiguous dims merged, variables renamed c0, c1, ...,
    trailing variables the index does not use dropped (none where it reads an indirect `i0`,
    which may vary with all of them)."""
    buffer, index, ranges = dep
    index, dims = _normalized(index, tuple(ranges.items()))
    return (buffer, index, dict(dims))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _normalized(
    index: IntLike, ranges: tuple[tuple[str, IntLike], ...]
) -> tuple[IntLike, tuple[tuple[str, IntLike], ...]]:
    (index,), dims = merge_dims([index], [(sym(k), s) for k, s in ranges])
    names = [sym(f"c{k}") for k in range(len(dims))]
    index = substitute(index, {v: c for (v, _), c in zip(dims, names)})
    used = sympy.sympify(index).free_symbols
    indirect = any(INDIRECT.fullmatch(s.name) for s in used)  # i0 may vary with every variable
    while dims and names[len(dims) - 1] not in used and not indirect:
        dims.pop()
    return index, tuple((str(c), s) for c, (_, s) in zip(names, dims))
