"""Sympy symbols for sizes and loop variables, created one way so that parse and build agree."""

from __future__ import annotations

from functools import cache

import sympy

Expr = sympy.Expr
IntLike = int | sympy.Expr


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
