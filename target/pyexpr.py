"""How index expressions, dtypes and attribute values read as Python, for the Triton emitter
(elementwise ops and reductions read theirs from the op tables: dialects/scalar_ops.py,
dialects/reductions.py)."""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from typing import Any

import sympy
from mind.ir import dtypes as dt
from mind.ir.attributes import PyCall, PyRef
from mind.ir.core import Value
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import Device, DType

TL_DTYPES: dict[DType, str] = {
    dt.b8: "tl.int1",
    dt.i8: "tl.int8",
    dt.i16: "tl.int16",
    dt.i32: "tl.int32",
    dt.i64: "tl.int64",
    dt.u8: "tl.uint8",
    dt.u16: "tl.uint16",
    dt.u32: "tl.uint32",
    dt.u64: "tl.uint64",
    dt.f16: "tl.float16",
    dt.bf16: "tl.bfloat16",
    dt.f32: "tl.float32",
    dt.f64: "tl.float64",
    dt.f8e4m3fn: "tl.float8e4nv",
    dt.f8e5m2: "tl.float8e5",
}


def tl_dtype(dtype: DType) -> str:
    if dtype not in TL_DTYPES:
        raise MindError(f"Triton has no dtype for {dtype}")
    return TL_DTYPES[dtype]


def torch_dtype(dtype: DType) -> str:
    """The torch dtype as the emitted Python names it: `torch.float32`."""
    return f"torch.{dtype.torch_name}"


def py_float(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def py_expr(
    expr: Any,
    names: Callable[[str], str],
    minmax=("tl.minimum", "tl.maximum"),
    truncating: bool = True,
) -> str:
    """A sympy index expression as Python integer arithmetic (floor -> //, Mod -> %); Min and
    Max call `minmax` (`min`, `max` in the host wrapper). `truncating`: `//` and `%` round
    toward zero, as Triton's do (C's), not toward -inf as Python's (the host wrapper's): a
    floor or Mod whose dividend may be negative (`floor(-1/s0)`, which sympy makes of
    `floor((p0*s0 + s0 - 1)/s0)`) is then written with a remainder made non-negative first.
    The divisor is a size or a positive constant. Written inline, not as a call of
    `triton_helpers.floordiv` or `remainder` (Python's semantics too): an index's operands may
    be plain ints (`-1 // s0`), which a jit helper takes as constexprs without a dtype."""

    def sub(e: Any) -> str:
        return py_expr(e, names, minmax, truncating)

    def operand(e: Any) -> str:  # a product or power binds looser than // and %
        text = sub(e)
        return f"({text})" if isinstance(e, sympy.Mul | sympy.Pow) else text

    def exact(dividend: sympy.Expr) -> bool:  # where // and % agree with floor and Mod
        return not truncating or _nonnegative(dividend)

    def mod(num: sympy.Expr, den: sympy.Expr) -> str:
        n, d = operand(num), operand(den)
        return f"({n} % {d})" if exact(num) else f"((({n} % {d}) + {d}) % {d})"

    def floor_div(num: sympy.Expr, den: sympy.Expr) -> str:
        n, d = operand(num), operand(den)
        return f"({n} // {d})" if exact(num) else f"(({n} - {mod(num, den)}) // {d})"

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
    if isinstance(expr, sympy.floor):
        return floor_div(*sympy.fraction(sympy.together(expr.args[0])))
    if isinstance(expr, sympy.ceiling):  # -floor(-n/d)
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        return f"(-{floor_div(-num, den)})"
    if isinstance(expr, sympy.Mod):
        return mod(*expr.args)
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


def _nonnegative(expr: sympy.Expr) -> bool:
    """Whether `expr` is never negative: sympy knows it (index and size symbols are declared
    non-negative), or it is a Mod (emitted in [0, d)), or a floor, sum or product of what is."""
    if expr.is_nonnegative or isinstance(expr, sympy.Mod):
        return True
    if isinstance(expr, sympy.floor):
        return all(_nonnegative(e) for e in sympy.fraction(sympy.together(expr.args[0])))
    if isinstance(expr, sympy.Add | sympy.Mul):
        return all(_nonnegative(e) for e in expr.args)
    return False


#: the objects built from arguments (`@builtins.complex(0.0, 2.0)`) that a call passes as built
_BUILTIN_CALLS = ("builtins.complex", "builtins.slice")


def py_literal(value: Any, name: Callable[[Value], str], device: Callable[[Device], str]) -> str:
    """An attribute value as a Python expression for the wrapper (ATen call arguments);
    `device` names a module-level torch.device."""

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
        return py_expr(value, lambda s: s, ("min", "max"), truncating=False)
    if isinstance(value, list):
        return "[" + ", ".join(lit(x) for x in value) + "]"
    if isinstance(value, tuple):
        items = [lit(x) for x in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {lit(x)}" for k, x in value.items()) + "}"
    if isinstance(value, DType):
        return torch_dtype(value)
    if isinstance(value, Device):
        return device(value)
    if isinstance(value, PyRef) and value.path.startswith("torch.") and is_dotted(value.path):
        return value.path
    if isinstance(value, PyCall) and value.path in _BUILTIN_CALLS:
        return f"{value.path.removeprefix('builtins.')}({', '.join(lit(x) for x in value.args)})"
    raise MindError(f"cannot pass {value!r} to a Python call")


def is_dotted(path: str) -> bool:
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in path.split("."))
