"""Index algebra shared by `realize` and `inline`: loop variables, view composition, flat offsets.

Both passes need the same answer to "what does this load really read": follow views down to the
node or buffer underneath, composing their index maps, and turn an N-d index over a buffer into
the flat offset its strides give.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TypeVar

import sympy
from mind.dialects.loops import Load, Pointwise, View, Yield, is_buffer
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.symbols import IntLike, Mod, as_int_like, sym, traced_value
from mind.ir.types import ScalarType, TensorType, contiguous_strides

T = TypeVar("T", bound=Operation)

#: one index expression per dim
Index = list[IntLike]
#: an N-d index, or a flat offset into a buffer
Access = Index | IntLike


#: the symbols of an indirect index (a value read from memory: `i0, i1, ...`)
INDIRECT = re.compile(r"i\d+")


def pvar(i: int) -> sympy.Symbol:
    """The i-th loop variable of a body (`p0, p1, ...`)."""
    return sym(f"p{i}")


def pvars(start: int, count: int) -> Index:
    """The loop variables `p<start> .. p<start+count-1>`."""
    return [pvar(i) for i in range(start, start + count)]


def broadcast_index(shape: Sequence[IntLike], index: Sequence[IntLike]) -> Index:
    """Read a tensor of `shape` at an index over a (possibly larger) broadcast shape: leading
    dims it lacks are dropped, its size-1 dims read element 0. A dim whose size is an
    expression that was 1 where the graph was traced (`Max(1, floor(s0/2))` at s0 = 3) is one
    too: torch's broadcasting asked whether it is 1, and Dynamo guards the answer for every
    input the graph runs on."""
    index = list(index)[len(index) - len(shape) :] if shape else []
    return [0 if size == 1 or traced_value(size) == 1 else e for size, e in zip(shape, index)]


def producer(value: Value) -> Operation | None:
    """The top-level op that defines `value`, or None for a graph input."""
    return value.owner if isinstance(value.owner, Operation) else None


def is_view(value: Value) -> bool:
    return isinstance(value.owner, View)


def consumers(value: Value, block: Block) -> set[Operation]:
    """The ops of `block` that read `value`, directly or through views (views themselves are
    not consumers: what reads them is)."""
    found: set[Operation] = set()
    for user in value.users:
        top = user.ancestor_in(block)
        if isinstance(top, View) and top.source is value:
            found |= consumers(top.result, block)
        elif top is not None:
            found.add(top)
    return found


def outer_tensors(op: Operation) -> list[Value]:
    """The tensors `op` reads from outside it (its operands, and what its body reads from
    outside), in order."""
    inner = {r for o in op.walk() for r in o.results}
    inner |= {a for region in op.regions for a in region.block.args}
    found = (v for o in op.walk() for v in o.operands if v not in inner)
    return list(dict.fromkeys(v for v in found if isinstance(v.type, TensorType)))


#: entries of the expression caches below: a graph repeats a few hundred index expressions
#: (every layer of a model indexes alike) in tens of thousands of calls
EXPR_CACHE_SIZE = 1 << 14


def substitute(expr: IntLike, mapping: dict[sympy.Symbol, IntLike]) -> IntLike:
    """Replace symbols simultaneously (p vars by a consumer's expressions), then simplify."""
    if isinstance(expr, int):
        return expr
    return _substitute(expr, tuple(mapping.items()))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _substitute(expr: sympy.Expr, mapping: tuple[tuple[sympy.Symbol, IntLike], ...]) -> IntLike:
    names = renaming(expr, dict(mapping))
    if names is not None:  # (the simplified expression is cached for all its renamings)
        return _simple(rename(simplify_index(expr), names))
    return simplify_index(expr.xreplace({k: sympy.sympify(v) for k, v in mapping}))


#: the expressions `rename` rebuilds: their canonical form depends only on the order of their
#: arguments' sort keys, so the image of a canonical one is canonical as it stands
_RENAMED = (sympy.Add, sympy.Mul, sympy.Pow, sympy.Mod, sympy.floor, sympy.ceiling)


def renaming(expr: sympy.Expr, mapping: dict) -> dict[sympy.Symbol, sympy.Symbol] | None:
    """`mapping` as a renaming of `expr`'s symbols that keeps its form (p vars to d vars, d vars
    to c vars), or None when it is not one: every symbol of `expr` it maps goes to a symbol with
    the same assumptions, and `expr`'s symbols renamed are distinct and in the same order (by
    name) as before; only sums, products, powers, Mod and floor hold them."""
    free = expr.free_symbols
    names = {k: v for k, v in mapping.items() if k in free}
    if not all(isinstance(v, sympy.Symbol) for v in names.values()):
        return None
    if any(k.assumptions0 != v.assumptions0 for k, v in names.items()):
        return None
    before = sorted(free, key=sympy.default_sort_key)
    after = [names.get(s, s) for s in before]
    if len(set(after)) < len(after) or sorted(after, key=sympy.default_sort_key) != after:
        return None
    if any(e.args and not isinstance(e, _RENAMED) for e in sympy.preorder_traversal(expr)):
        return None
    return names


def rename(expr: IntLike, names: dict[sympy.Symbol, sympy.Symbol]) -> IntLike:
    """`expr` with symbols renamed by `renaming`'s answer: as `xreplace` gives it, without
    evaluating a sum, product, Mod or floor again, which their order kept cannot change (sympy's
    Mod evaluation is most of what substituting cost on reshaped indexes)."""
    if isinstance(expr, int) or not expr.args:
        return names.get(expr, expr)
    return expr.func(*(rename(a, names) for a in expr.args), evaluate=False)


def linear_coefficients(
    expr: IntLike, variables: Sequence[sympy.Symbol]
) -> dict[sympy.Symbol, IntLike] | None:
    """The coefficient of each of `variables` in `expr` (ints where they are constants), or None
    where `expr` is not linear in them: a term holding two of them, a power, a floor or Mod of
    one. Term by term: sympy's `coeff` walks the expression once per variable."""
    wanted = set(variables)
    coeffs: dict[sympy.Symbol, IntLike] = dict.fromkeys(variables, 0)
    for term, factor in sympy.sympify(expr).as_coefficients_dict().items():
        found = term.free_symbols & wanted
        if not found:
            continue
        if len(found) > 1:
            return None
        (var,) = found
        rest = term / var
        if rest.free_symbols & wanted:
            return None
        coeffs[var] += factor * rest
    return {v: as_int_like(c) for v, c in coeffs.items()}


def compose_view(
    value: Value, index: list[IntLike]
) -> tuple[Value, list[IntLike], list[Operation]]:
    """Follow a chain of views from `value` read at `index` to the tensor underneath; returns that
    tensor, the index into it, and the views passed through (for their origins)."""
    views: list[Operation] = []
    while is_view(value):
        view = producer(value)
        assert view is not None
        views.append(view)
        mapping = {pvar(i): e for i, e in enumerate(index)}
        value, index = view.source, [substitute(e, mapping) for e in view.index]
    return value, index, views


def element_reads(value: Value, index: Index) -> Iterator[tuple[Value, IntLike]]:
    """The buffer elements that element `index` of `value` reads, as (buffer, flat offset):
    itself where it is a buffer, through views, and the loads of the unrealized node computing
    it, whose body its readers inline, and theirs (a reduction's r variables at 0)."""
    base, at, _ = compose_view(value, list(index))
    node = producer(base)
    if is_buffer(base):
        yield base, flat_offset(base, at)
        return
    if not isinstance(node, Pointwise):  # a call's result: nothing of the graph's to read
        return
    mapping = {pvar(k): e for k, e in enumerate(at)}
    r_dims = len(getattr(node, "reduction_ranges", None) or ())
    mapping.update({pvar(k): 0 for k in range(len(at), len(at) + r_dims)})
    for load in body_ops(node, Load):
        if isinstance(load.index, list):
            yield from element_reads(load.source, [substitute(e, mapping) for e in load.index])
        else:  # a buffer's flat offset
            yield load.source, substitute(load.index, mapping)


def copy_node(src: Value, name: str, origins: list[str], loc) -> Operation:
    """An unrealized pointwise node whose element `[p0, ...]` is `src[p0, ...]`."""
    t = src.type
    load = Load.build(
        "loops.load",
        source=src,
        index=pvars(0, t.rank),
        results=[ScalarType(t.dtype)],
        names=["0"],
    )
    body = Block(ops=[load, Yield.build("loops.yield", value=load.result)])
    return Pointwise.build(
        "loops.pointwise",
        origins=origins,
        results=[dataclasses.replace(t, strides=None)],
        names=[name],
        regions=[Region(body)],
        loc=loc,
    )


def base_of(value: Value) -> Value:
    """The node or buffer a chain of views reads."""
    while is_view(value):
        value = value.owner.source
    return value


def strides_of(value: Value) -> tuple[IntLike, ...]:
    """A buffer's strides; a graph input typed without strides is read as contiguous."""
    t = value.type
    assert isinstance(t, TensorType)
    return t.strides if t.strides is not None else contiguous_strides(t.shape)


def flat_offset(value: Value, index: Access) -> IntLike:
    """The flat element offset of an N-d index into buffer `value` (a flat index stays as is)."""
    if not isinstance(index, list):
        return index
    strides = strides_of(value)
    return simplify_index(sum((sympy.sympify(e) * s for e, s in zip(index, strides)), start=0))


def simplify_index(expr: IntLike) -> IntLike:
    """Expand to a sum of terms (`128*p0 + p1`) and fold `k*c*floor(x/c) + k*Mod(x, c)` back
    into `k*x`, the pair that a reshape of a contiguous buffer leaves behind (x may itself be a
    floor: two reshapes in a row leave `384*floor(p/384) + 64*Mod(floor(p/64), 6) + Mod(p,
    64)`). c and k may be sizes (`16*s0*Mod(floor(p/(16*s0)), 4) + 64*s0*floor(p/(64*s0))` is
    `16*s0*floor(p/(16*s0))`), as dynamic shapes make them."""
    return expr if isinstance(expr, int) or expr in _SIMPLE else _simplify_index(expr)


#: expressions `simplify_index` leaves as they are: what it returned (simplifying again changes
#: nothing), and their renamings. Expanding a reshape's Mod and floor terms again is most of
#: what simplifying costs, and most indexes come back simplified already
_SIMPLE: dict[sympy.Expr, None] = {}


def _simple(expr: IntLike) -> IntLike:
    """`expr`, remembered as simplified."""
    if not isinstance(expr, int):
        if len(_SIMPLE) >= EXPR_CACHE_SIZE:
            _SIMPLE.clear()
        _SIMPLE[expr] = None
    return expr


def _floor_div(x: sympy.Expr, c: sympy.Expr) -> sympy.Expr:
    """floor(x / c) for a `_divisor` c, with floor(floor(y) / c) as floor(y / c) (equal for
    c > 0), the form sympy keeps for a floor of a floor."""
    return sympy.floor((x.args[0] if isinstance(x, sympy.floor) else x) / c)


def _divisor(c: sympy.Expr) -> bool:
    """A Mod's right side the fold takes: a positive integer, or sizes (a product of symbols),
    positive wherever a Mod by them is defined."""
    if c.is_Integer:
        return c > 0
    coeff, rest = c.as_coeff_Mul()
    return coeff.is_Integer and coeff > 0 and all(f.is_Symbol for f in sympy.Mul.make_args(rest))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _simplify_index(expr: sympy.Expr) -> IntLike:
    expr = sympy.expand(expr)
    changed = True
    while changed:
        changed = False
        terms = sympy.Add.make_args(expr)
        for term in terms:
            mods = [f for f in sympy.Mul.make_args(term) if isinstance(f, sympy.Mod)]
            if len(mods) != 1 or not _divisor(mods[0].args[1]):
                continue
            coeff = term / mods[0]  # k of k*Mod(x, c): an integer, or sizes
            x, c = mods[0].args
            partner = coeff * c * _floor_div(x, c)
            if partner in terms:
                expr = sympy.expand(expr - term - partner + coeff * x)
                changed = True
                break
    return _simple(as_int_like(expr))


def body_ops(op: Operation, cls: type[T]) -> Iterator[T]:
    """The ops of class `cls` in a node's body."""
    if op.regions:
        yield from (o for o in op.body.ops if isinstance(o, cls))


def simplify_with_ranges(expr: IntLike, ranges: dict[sympy.Symbol, IntLike]) -> IntLike:
    """`expr` with what the loop variables' ranges (`p0` in `[0, ranges[p0])`) make trivial folded:
    `Mod(x, m)` is `x` and `floor(x/m)` is 0 where `x` lies in `[0, m)`. A loop cut in pieces
    (`p0` as `16*p1 + p2`) leaves such terms behind (`Mod(16*p1 + p2, 16)` is `p2`), as Inductor's
    `simplify_with_ranges` folds them."""
    if isinstance(expr, int) or not expr.has(sympy.Mod, sympy.floor):
        return expr
    return _with_ranges(expr, tuple(ranges.items()))


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _with_ranges(expr: sympy.Expr, ranges: tuple[tuple[sympy.Symbol, IntLike], ...]) -> IntLike:
    bounds = dict(ranges)

    def mod(x: sympy.Expr, m: sympy.Expr) -> sympy.Expr:
        return x if _below(x, m, bounds) else Mod(x, m)

    def floor(arg: sympy.Expr) -> sympy.Expr:
        terms = sympy.Add.make_args(sympy.expand(arg))
        whole = sympy.Add(*(t for t in terms if t.is_integer))
        num, den = sympy.fraction(sympy.together(arg - whole))
        if _below(num, den, bounds):
            return whole
        return whole + _drop_remainder(num, den, bounds)

    def fold(e: sympy.Expr) -> sympy.Expr:  # inner terms first: replace works bottom up
        return mod(*e.args) if isinstance(e, sympy.Mod) else floor(e.args[0])

    return simplify_index(expr.replace(lambda e: isinstance(e, sympy.Mod | sympy.floor), fold))


def _drop_remainder(num: sympy.Expr, den: sympy.Expr, ranges: dict) -> sympy.Expr:
    """floor(num / den), as floor(n / d) where num is c*n + r and den is c*d (c an integer) with
    0 <= r < c: floor((c*n + r) / (c*d)) is floor(floor((c*n + r) / c) / d), and the inner
    floor is n. A flat index split over [s, 256] and joined again reads `floor((256*p0 +
    p1) / (256*s))`, which is `floor(p0 / s)` for p1 < 256."""
    c, d = den.as_coeff_Mul()
    if c.is_Integer and c > 1:
        terms = sympy.Add.make_args(sympy.expand(num))
        whole = [t for t in terms if (t / c).is_integer]
        rest = sympy.Add(*(t for t in terms if t not in whole))
        if whole and rest != 0 and _below(rest, c, ranges):
            return sympy.floor(sympy.Add(*whole) / c / d)
    return sympy.floor(num / den)


def _below(x: sympy.Expr, bound: sympy.Expr, ranges: dict[sympy.Symbol, IntLike]) -> bool:
    """Whether `0 <= x < bound` for every value of the loop variables in `x` (linear in them,
    with non-negative coefficients), sizes being positive."""
    x = sympy.expand(x)
    loop_vars = [v for v in x.free_symbols if v in ranges]
    coeffs = [x.coeff(v) for v in loop_vars]
    rest = x - sum((c * v for c, v in zip(coeffs, loop_vars)), start=sympy.Integer(0))
    if any(e.free_symbols & set(loop_vars) or not e.is_nonnegative for e in (*coeffs, rest)):
        return False
    top = rest + sum((c * (ranges[v] - 1) for c, v in zip(coeffs, loop_vars)), sympy.Integer(0))
    return bool((bound - 1 - top).is_nonnegative)
