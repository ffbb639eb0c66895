"""How each triton-dialect elementwise op, index expression and attribute reads as Python: the
tables the emitter formats with operand names. Math without a `tl` builtin goes through
`triton_helpers` (mind.runtime.triton_helpers), which maps it to libdevice on a GPU and to `tl`
primitives under TRITON_INTERPRET, where libdevice cannot run.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from typing import Any

import sympy
import torch
from mind.ir.attributes import PyRef
from mind.ir.core import Value
from mind.ir.diagnostics import MindError

_HELPER_UNARY = (
    "expm1 log10 log1p tan asin acos atan sinh cosh tanh asinh acosh atanh erfc round trunc sign "
    "lgamma isinf isfinite signbit relu"
).split()
_HELPER_BINARY = "floordiv remainder pow maximum minimum atan2 hypot copysign".split()

#: op name -> format string over operand names ({0}, {1}, {2})
ELEMENTWISE: dict[str, str] = {
    "neg": "-{0}",
    "abs": "tl.abs({0})",
    "reciprocal": "1 / {0}",
    "square": "{0} * {0}",
    "bitwise_not": "~{0}",
    "logical_not": "{0} == 0",
    "isnan": "{0} != {0}",
    **{
        n: f"tl.{n}({{0}})"
        for n in "exp exp2 log log2 sqrt rsqrt sin cos sigmoid erf floor".split()
    },
    "ceil": "tl.ceil({0})",
    **{n: f"triton_helpers.{n}({{0}})" for n in _HELPER_UNARY},
    **{n: f"triton_helpers.{n}({{0}}, {{1}})" for n in _HELPER_BINARY},
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "truediv": "{0} / {1}",
    "mod": "triton_helpers.remainder({0}, {1})",  # loops' mod is Python's (sympy Mod), not C's
    "fmod": "{0} % {1}",
    "bitwise_and": "{0} & {1}",
    "bitwise_or": "{0} | {1}",
    "bitwise_xor": "{0} ^ {1}",
    "lshift": "{0} << {1}",
    "rshift": "{0} >> {1}",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "lt": "{0} < {1}",
    "le": "{0} <= {1}",
    "gt": "{0} > {1}",
    "ge": "{0} >= {1}",
    "logical_and": "{0} & {1}",
    "logical_or": "{0} | {1}",
    "logical_xor": "{0} ^ {1}",
    "where": "tl.where({0}, {1}, {2})",
}

#: reduction_type -> Python for `triton.reduce(value, axis)` ({v}, {axis}, {dt})
REDUCE: dict[str, str] = {
    "sum": "tl.sum({v}, {axis}, keep_dims=True).to({dt})",
    "prod": "triton_helpers.prod({v}, {axis}).to({dt})",
    # NaN wins, as in torch (tl.max/tl.min drop it): Inductor's max2/min2 reduce the same way
    "max": "tl.reduce({v}, {axis}, triton_helpers.maximum, keep_dims=True)",
    "min": "tl.reduce({v}, {axis}, triton_helpers.minimum, keep_dims=True)",
    "any": "tl.max({v}.to(tl.int8), {axis}, keep_dims=True) != 0",
    "all": "tl.min({v}.to(tl.int8), {axis}, keep_dims=True) != 0",
}

TL_DTYPES: dict[torch.dtype, str] = {
    torch.bool: "tl.int1",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.float8_e4m3fn: "tl.float8e4nv",
    torch.float8_e5m2: "tl.float8e5",
}


def tl_dtype(dtype: torch.dtype) -> str:
    if dtype not in TL_DTYPES:
        raise MindError(f"Triton has no dtype for {dtype}")
    return TL_DTYPES[dtype]


def py_float(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def py_expr(expr: Any, names: Callable[[str], str], minmax=("tl.minimum", "tl.maximum")) -> str:
    """A sympy index expression as Python integer arithmetic (floor -> //, Mod -> %); Min and
    Max call `minmax` (`min`, `max` in the host wrapper)."""

    def sub(e: Any) -> str:
        return py_expr(e, names, minmax)

    def operand(e: Any) -> str:  # a product or power binds looser than // and %
        text = sub(e)
        return f"({text})" if isinstance(e, sympy.Mul | sympy.Pow) else text

    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return names(expr.name)
    if isinstance(expr, sympy.Add):
        terms = [sub(t) for t in expr.as_ordered_terms()]
        return "(" + " + ".join(terms).replace("+ -", "- ") + ")"
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if not coeff.is_Integer:
            raise MindError(f"index expression '{expr}' is not integral")
        factors = [sub(f) for f in sympy.Mul.make_args(rest)]
        return "*".join(([str(int(coeff))] if coeff != 1 else []) + factors)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return "*".join([sub(expr.base)] * int(expr.exp))
    if isinstance(expr, sympy.floor | sympy.ceiling):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        n, d = operand(num), operand(den)
        return f"({n} // {d})" if isinstance(expr, sympy.floor) else f"(-((-{n}) // {d}))"
    if isinstance(expr, sympy.Mod):
        return f"({operand(expr.args[0])} % {operand(expr.args[1])})"
    if type(expr).__name__ in ("Min", "Max"):  # sympy's, or torch.utils._sympy's from capture
        fn = minmax[0] if type(expr).__name__ == "Min" else minmax[1]
        args = [sub(a) for a in expr.args]
        text = args[0]
        for arg in args[1:]:
            text = f"{fn}({text}, {arg})"
        return text
    if isinstance(expr, sympy.Abs):
        return f"tl.abs({sub(expr.args[0])})"
    raise MindError(f"cannot emit index expression '{expr}'")


def py_literal(value: Any, name: Callable[[Value], str], device: str = "device") -> str:
    """An attribute value as a Python expression for the wrapper (ATen call arguments)."""

    def lit(x: Any) -> str:
        return py_literal(x, name, device)

    if isinstance(value, Value):
        return name(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | str):
        return repr(value)
    if isinstance(value, float):
        return py_float(value)
    if isinstance(value, sympy.Expr):  # over size symbols, bound by name in the wrapper
        return py_expr(value, lambda s: s, ("min", "max"))
    if isinstance(value, list):
        return "[" + ", ".join(lit(x) for x in value) + "]"
    if isinstance(value, tuple):
        items = [lit(x) for x in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {lit(x)}" for k, x in value.items()) + "}"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return device
    if isinstance(value, PyRef) and value.path.startswith("torch.") and is_dotted(value.path):
        return value.path
    raise MindError(f"cannot pass {value!r} to a Python call")


def is_dotted(path: str) -> bool:
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in path.split("."))
