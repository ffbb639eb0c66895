"""The scalar operations loop bodies are made of: one table, one row per op, read by everyone who
handles them. The loops and scheduled dialects register each as `<dialect>.<name>` on scalars,
the triton dialect on blocks; the lowering builds them by name, the evaluator computes them with
`torch`, the Triton emitter writes `triton`.

A row: the arity; the result's dtype where it is fixed (b8 for a predicate, i32 for an exponent),
else the operands'; the torch function that computes it elementwise (the evaluator's reference, a
name under `torch`; `frexp:exponent` names a field of what `torch.frexp` returns); the Python the
Triton emitter writes, over the operand names `{0}, {1}, {2}`; whether an integer zero divisor
raises in eager (on CPU: a kernel there asserts it is nonzero); the dtypes it takes, where not
all (what Triton compiles it for: IR that verifies compiles for a GPU); whether it is costly, a
libdevice routine that realize computes once rather than in every consumer's element. Math
without a `tl` builtin calls `triton_helpers` (mind.runtime), which maps it to libdevice on a GPU
and to `tl` primitives in the interpreter (the special functions: to torch's, on the host).
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.ir import dtypes as dt
from mind.ir.constraints import SCALAR, Constraint
from mind.ir.core import Operation
from mind.ir.opdef import Op, Verifier, operand, result
from mind.ir.registry import Dialect, VerifyError


@dataclass(frozen=True)
class ScalarOp:
    name: str
    arity: int
    #: the result's dtype where it does not follow the operands' (b8 for predicates)
    result: dt.DType | None = None
    #: the torch function (the evaluator's reference)
    torch: str = ""
    #: the Python for Triton, over operand names {0}, {1}, {2}
    triton: str = ""
    #: divides by its second operand: an integer zero divisor raises in eager on CPU
    divides: bool = False
    #: the dtypes its operands may be (`TAKES`), where not all
    takes: str = "any"
    #: a libdevice routine of tens of instructions (trig, erf, pow, special functions), not a
    #: hardware approximation (exp, log, sqrt): worth a load to avoid computing again
    costly: bool = False


def _rows(names: str, arity: int, result: dt.DType | None = None) -> list[ScalarOp]:
    return [ScalarOp(n, arity, result) for n in names.split()]


_ROWS = [
    *_rows(
        "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
        "cosh tanh asinh acosh atanh sigmoid erf erfc relu floor ceil round trunc sign reciprocal "
        "square bitwise_not lgamma frexp_mantissa i0 i1 j0 j1 y0 y1 erfcx erfinv",
        1,
    ),
    *_rows("logical_not isnan isinf isfinite signbit", 1, result=dt.b8),
    ScalarOp("frexp_exponent", 1, dt.i32),
    *_rows(
        "add sub mul truediv floordiv mod remainder pow maximum minimum atan2 fmod hypot copysign "
        "nextafter bitwise_and bitwise_or bitwise_xor lshift rshift",
        2,
    ),
    *_rows("eq ne lt le gt ge logical_and logical_or logical_xor", 2, result=dt.b8),
    ScalarOp("where", 3),
]

#: torch's names where they differ; `mod` is Python's (sympy's Mod), torch's `remainder`
_TORCH = {
    "truediv": "true_divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
    "frexp_mantissa": "frexp:mantissa",
    "frexp_exponent": "frexp:exponent",
    "i1": "special.i1",
    "j0": "special.bessel_j0",
    "j1": "special.bessel_j1",
    "y0": "special.bessel_y0",
    "y1": "special.bessel_y1",
    "erfcx": "special.erfcx",
}

_HELPER_UNARY = (
    "neg expm1 log10 log1p tan asin acos atan sinh cosh tanh asinh acosh atanh erfc round trunc sign "
    "bitwise_not "
    "lgamma isinf isfinite signbit relu frexp_mantissa frexp_exponent "
    "i0 i1 j0 j1 y0 y1 erfcx erfinv"
).split()
_HELPER_BINARY = "floordiv remainder pow maximum minimum atan2 hypot copysign nextafter".split()
_TL_UNARY = "exp exp2 log log2 sqrt rsqrt sin cos sigmoid erf floor ceil".split()

_TRITON: dict[str, str] = {
    **{n: f"tl.{n}({{0}})" for n in _TL_UNARY},
    **{n: f"triton_helpers.{n}({{0}})" for n in _HELPER_UNARY},
    **{n: f"triton_helpers.{n}({{0}}, {{1}})" for n in _HELPER_BINARY},
    "abs": "tl.abs({0})",
    "reciprocal": "1 / {0}",
    "square": "{0} * {0}",
    "logical_not": "{0} == 0",
    "isnan": "{0} != {0}",
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "truediv": "{0} / {1}",
    "mod": "triton_helpers.remainder({0}, {1})",  # Python's remainder (compiled `%` truncates)
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

#: ops whose integer form raises ZeroDivisionError on a zero divisor (CPU eager)
_DIVIDES = "floordiv mod remainder fmod".split()
#: ops that cost a libdevice routine of tens of instructions on a GPU (`ScalarOp.costly`)
_COSTLY = (
    "expm1 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh erf erfc "
    "erfinv erfcx lgamma i0 i1 j0 j1 y0 y1 pow atan2 hypot"
).split()

#: the dtypes an op's operands may be, by name: what Triton compiles it for
TAKES: dict[str, tuple[dt.DType, ...] | None] = {
    "any": None,
    "f32 or f64": (dt.f32, dt.f64),  # libdevice's and tl's math
    "floating-point": (dt.f16, dt.bf16, dt.f32, dt.f64),
    "integer or bool": (dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u16, dt.u32, dt.u64, dt.b8),
    "b8": (dt.b8,),
}
#: ops on some dtypes only: math in f32 or f64 (the lowering computes f16's, bf16's and an
#: integer's in f32; floor, ceil, round and trunc of an integer are the integer), bitwise ops on
#: integers and bools, logical ops on b8 (the lowering reads their operands as b8)
_TAKES = {
    **dict.fromkeys(
        "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
        "asinh acosh atanh sigmoid erf erfc floor ceil round trunc lgamma frexp_mantissa "
        "frexp_exponent i0 i1 j0 j1 y0 y1 erfcx erfinv pow atan2 hypot".split(),
        "f32 or f64",
    ),
    **dict.fromkeys("reciprocal copysign nextafter".split(), "floating-point"),
    **dict.fromkeys(
        "bitwise_not bitwise_and bitwise_or bitwise_xor lshift rshift".split(), "integer or bool"
    ),
    **dict.fromkeys("logical_and logical_or logical_xor".split(), "b8"),
}

SCALAR_OPS: dict[str, ScalarOp] = {
    r.name: ScalarOp(
        r.name,
        r.arity,
        r.result,
        _TORCH.get(r.name, r.name),
        _TRITON[r.name],
        r.name in _DIVIDES,
        _TAKES.get(r.name, r.takes),
        r.name in _COSTLY,
    )
    for r in _ROWS
}


def op_classes(operands: Constraint, results: Constraint) -> dict[int, type[Op]]:
    """The op class of each arity, over values of the `operands` types (scalars in loop bodies,
    blocks or scalars in kernels)."""

    class Unary(Op):
        x = operand(operands)
        result = result(results)

    class Binary(Op):
        a = operand(operands)
        b = operand(operands)
        result = result(results)

    class Where(Op):
        condition = operand(operands)
        a = operand(operands)
        b = operand(operands)
        result = result(results)

    return {1: Unary, 2: Binary, 3: Where}


_BODY_CLASSES = op_classes(SCALAR, SCALAR)


def result_dtype(op: Operation, dtypes: list[dt.DType]) -> dt.DType:
    """The scalar rule: operands share one dtype (promotion is explicit; where's condition is
    b8) of a kind the op takes, the result is that dtype, or the row's own (b8 for a
    predicate). `dtypes` are the operands'."""
    spec = SCALAR_OPS[op.kind]
    if spec.name == "where":
        if dtypes[0] != dt.b8:
            raise VerifyError(
                f"type mismatch: '{op.name}' condition must be b8, got {dtypes[0]}", op.loc
            )
        dtypes = dtypes[1:]
    if len(set(dtypes)) > 1:
        names = ", ".join(d.name for d in dtypes)
        raise VerifyError(
            f"type mismatch: '{op.name}' operands have different dtypes ({names})", op.loc
        )
    allowed = TAKES[spec.takes]
    if dtypes and allowed is not None and dtypes[0] not in allowed:
        raise VerifyError(
            f"type mismatch: '{op.name}' takes {spec.takes} operands, got {dtypes[0]}", op.loc
        )
    return spec.result or dtypes[0]


def _verify_scalar(op: Operation) -> None:
    expected = result_dtype(op, [v.type.dtype for v in op.operands])
    if op.result.type.dtype != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' gives {expected}, declared {op.result.type}", op.loc
        )


def register_scalar_ops(
    dialect: Dialect,
    classes: dict[int, type[Op]] = _BODY_CLASSES,
    verify: Verifier = _verify_scalar,
    summary: str = "A scalar op: operands of one dtype, the result of it (b8 for predicates, "
    "i32 for frexp_exponent)",
) -> None:
    """Register every scalar op under `dialect`'s prefix (`loops.add`, `scheduled.add`, ...)."""
    for spec in SCALAR_OPS.values():
        dialect.add(spec.name, classes[spec.arity], verify=verify, summary=summary)
