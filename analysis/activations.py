"""Which activation a pointwise loops node applies to the one value it loads: its body read as a
function f(x) of that load (a sympy expression), compared with the definitions of the
activations a matmul's epilogue can apply (passes/mm_epilogues.py).

The comparison is on the expanded expression, so every spelling of an activation matches:
tanh-GELU as `F.gelu(approximate="tanh")` lowers, or as transformers' `gelu_new` writes it out
(`0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`), both expand to `0.5*x +
0.5*x*tanh(0.7978...*x + 0.0357...*x**3)`. Constants match to RTOL: a program's sqrt(2 / pi) may
differ from another's in its last bit, or be written to 8 digits (BLOOM's 0.79788456), which
moves an f16 or bf16 result (the only ones mm-epilogues folds) by far less than its rounding.
Everything else matches exactly, so a function that differs anywhere (erf-GELU, a clamped GELU)
does not match.

A body reads as f(x) only when it loads one value, computes with OPS alone, and rounds at most
once, at its end: a cast in between is allowed only where it widens (bf16 -> f32), which loses
nothing.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import cache

import sympy
from mind.dialects.loops import Load, Pointwise
from mind.ir import dtypes as dt
from mind.ir.core import Value

X = sympy.Symbol("x", real=True)

#: the body ops an activation's body may use, as functions of sympy operands
OPS: dict[str, Callable[..., sympy.Expr]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "neg": operator.neg,
    "pow": operator.pow,
    "square": lambda a: a * a,
    "tanh": sympy.tanh,
}

#: the activations a matmul epilogue applies, as functions of X. Not ReLU: cuBLASLt's ReLU
#: epilogue gives 0 for a NaN, where torch.relu gives NaN (a NaN would vanish)
ACTIVATIONS = {
    "gelu_tanh": 0.5 * X * (1 + sympy.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X**3))),
}

#: how far a constant may be from the definition's, relative (f16's rounding is 4.9e-4)
RTOL = 1e-6


def activation_of(node: Pointwise) -> tuple[str, Load] | None:
    """The activation `node` applies to its one load, and that load; None if it applies none."""
    read = as_function(node)
    if read is None:
        return None
    load, expr = read
    normal = _normal(expr)
    for name, definition in _normal_definitions().items():
        if _close(normal, definition):
            return name, load
    return None


@cache
def _normal_definitions() -> dict[str, sympy.Expr]:
    """ACTIVATIONS in `_normal` form, made once."""
    return {name: _normal(definition) for name, definition in ACTIVATIONS.items()}


def as_function(node: Pointwise) -> tuple[Load, sympy.Expr] | None:
    """`node`'s body as f(X), X its one load; None where it is no such function (see module)."""
    env: dict[Value, sympy.Expr] = {}
    load, ops = None, list(node.body.ops)
    out = ops[-1].operands[0] if ops and ops[-1].operands else None
    for op in ops[:-1]:
        kind = op.name.split(".", 1)[1]
        if isinstance(op, Load):
            if load is not None or op.mask is not None or op.indirect:
                return None
            load, env[op.result] = op, X
        elif kind == "constant" and isinstance(op.value, int | float):
            env[op.result] = sympy.Float(op.value) if isinstance(op.value, float) else op.value
        elif kind == "cast" and _exact_or_last(op.operands[0], op.result, out):
            env[op.result] = env[op.operands[0]]
        elif kind in OPS and all(v in env for v in op.operands):
            env[op.result] = OPS[kind](*(env[v] for v in op.operands))
        else:
            return None
    if load is None or out not in env:
        return None
    return load, env[out]


def _exact_or_last(source: Value, result: Value, out: Value | None) -> bool:
    """A cast f(x) may skip: one that widens a float, or the rounding of the body's result."""
    src, dst = source.type.dtype, result.type.dtype
    if not (src.is_floating_point and dst.is_floating_point):
        return False
    return result is out or dst == dt.upcast(src)


def same_function(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Whether two expressions of X are one function, constants compared to RTOL."""
    return _close(_normal(a), _normal(b))


def _normal(expr: sympy.Expr) -> sympy.Expr:
    """Expanded (inside functions too), with whole-number floats made integers (1.0*x is x)."""
    whole = {f: sympy.Integer(int(f)) for f in expr.atoms(sympy.Float) if float(f).is_integer()}
    return sympy.expand(expr.xreplace(whole))


def _close(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.is_Number or b.is_Number:
        if not (a.is_Number and b.is_Number):
            return False
        x, y = float(a), float(b)
        return abs(x - y) <= RTOL * max(abs(x), abs(y))
    if a.func != b.func or len(a.args) != len(b.args):
        return False
    if not a.args:
        return a == b
    if a.is_commutative and a.func in (sympy.Add, sympy.Mul):
        rest = list(b.args)  # the same terms in any order
        for term in a.args:
            match = next((i for i, other in enumerate(rest) if _close(term, other)), None)
            if match is None:
                return False
            rest.pop(match)
        return True
    return all(_close(x, y) for x, y in zip(a.args, b.args))
