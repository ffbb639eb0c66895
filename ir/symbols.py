"""Sympy symbols for sizes and loop variables, created one way so that parse and build agree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

import sympy

from .context import bound

Expr = sympy.Expr
IntLike = int | sympy.Expr


class Mod(sympy.Mod):
    """sympy's Mod, evaluated correctly where its left side holds an integer times a Mod: sympy
    1.14 takes `Mod(2*Mod(n, 4), 4)` for `2*Mod(n, 4)` (it moves the factor out of the outer
    Mod) and `Mod(2*Mod(n, 4), 8)` for `2*Mod(Mod(n, 4)**2, 4)`. Composing views makes such
    indexes (a Swin window's rows, reshaped, read two at a time). A term `c*Mod(x, a)` is `c*x`
    modulo `q` wherever `q` divides `c*a`: it is rewritten so before sympy evaluates, and every
    index Mod mind builds is this class (sympy's evaluation of it builds this class too)."""

    @classmethod
    def eval(cls, p: sympy.Expr, q: sympy.Expr) -> sympy.Expr | None:
        if q.is_Integer and q > 0:
            terms = sympy.Add.make_args(p)
            unnested = [_unnest(t, int(q)) for t in terms]
            if unnested != list(terms):
                return cls(sympy.Add(*unnested), q)
            if any(t.is_Mul and t.has(sympy.Mod) for t in terms):
                return None  # sympy gets a Mod inside a product wrong: left as it is
        return super().eval(p, q)


def _unnest(term: sympy.Expr, q: int) -> sympy.Expr:
    """`c*x` for a term `c*Mod(x, a)` where `q` divides `c*a` (equal modulo q), else `term`."""
    c, rest = term.as_coeff_Mul()
    if isinstance(rest, sympy.Mod) and c.is_Integer and rest.args[1].is_Integer:
        if (int(c) * int(rest.args[1])) % q == 0:
            return c * rest.args[0]
    return term


@cache
def sym(name: str) -> sympy.Symbol:
    """Every size and index symbol is a non-negative integer: it makes index algebra simplify."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def as_int_like(value: int | sympy.Expr) -> IntLike:
    """Normalize to a Python int when the expression is a constant, else keep the expression."""
    if isinstance(value, int):
        return value
    value = sympy.sympify(value)
    return int(value) if value.is_Integer else value


def format_expr(value: IntLike) -> str:
    return str(value)


@cache
def is_integral(expr: sympy.Expr) -> bool:
    """Whether an index expression is integer arithmetic as written: no fraction or float
    outside `floor`/`ceiling` (`s0/2` is not, `floor(s0/2)` is), which is what code can compute."""
    if isinstance(expr, sympy.floor | sympy.ceiling):
        return True
    if expr.is_Number:
        return bool(expr.is_Integer)
    if isinstance(expr, sympy.Pow):
        return bool(expr.exp.is_Integer and expr.exp >= 0) and is_integral(expr.base)
    return all(is_integral(a) for a in expr.args)


#: what a size symbol counts as when a heuristic needs a number and its graph gives it no hint
#: (Inductor's default size hint)
SIZE_HINT = 8192
#: the hints in force (`symbol_hints`): each symbol's size where its graph was traced
_HINTS: ContextVar[dict[str, int] | None] = ContextVar("mind_size_hints", default=None)


@contextmanager
def symbol_hints(hints: dict[str, int] | None) -> Iterator[None]:
    """Inside, `size_hint` counts each symbol of `hints` at its hint (a graph's `hints`)."""
    with bound(_HINTS, hints):
        yield


def traced_value(size: IntLike) -> int | None:
    """`size` where its graph was traced (every symbol at its hint); None where a symbol has no
    hint."""
    hints = _HINTS.get() or {}
    if isinstance(size, sympy.Expr) and any(s.name not in hints for s in size.free_symbols):
        return None
    return size_hint(size)


def size_hint(size: IntLike) -> int:
    """`size` with each symbol at its hint (`symbol_hints`), or SIZE_HINT without one: for
    estimating bytes and choosing configs, never for what must hold at every size. As Inductor
    does, a graph traced with sizes symbolic chooses its kernels' configs for the sizes it was
    traced at: a softmax over rows of 96 keys, compiled once a second sequence length made
    them symbolic, gets blocks for 96, not for 8192 (a block 20 times the row)."""
    if isinstance(size, int):
        return size
    size = sympy.sympify(size)
    hints = _HINTS.get() or {}
    return int(size.subs({s: hints.get(s.name, SIZE_HINT) for s in size.free_symbols}))
