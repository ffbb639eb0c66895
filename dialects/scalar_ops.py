"""The scalar operations that loop bodies are made of, shared by the loops and scheduled
dialects (which register them under their own prefix) and by every consumer of bodies
(evaluator, code generator). One table: name -> how many operands, what dtype comes out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScalarOp:
    name: str
    arity: int
    #: "same": the operands' dtype; "bool": b8
    result: str = "same"


UNARY = (
    "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh "
    "tanh asinh acosh atanh sigmoid erf erfc relu floor ceil round trunc sign reciprocal square "
    "bitwise_not lgamma"
).split()
UNARY_PREDICATES = "logical_not isnan isinf isfinite signbit".split()
BINARY = (
    "add sub mul truediv floordiv mod remainder pow maximum minimum atan2 fmod hypot copysign "
    "bitwise_and bitwise_or bitwise_xor lshift rshift"
).split()
BINARY_PREDICATES = "eq ne lt le gt ge logical_and logical_or logical_xor".split()

SCALAR_OPS: dict[str, ScalarOp] = {
    **{n: ScalarOp(n, 1) for n in UNARY},
    **{n: ScalarOp(n, 1, "bool") for n in UNARY_PREDICATES},
    **{n: ScalarOp(n, 2) for n in BINARY},
    **{n: ScalarOp(n, 2, "bool") for n in BINARY_PREDICATES},
    "where": ScalarOp("where", 3),
}

#: reduction kinds a reduction node (or a scheduled.reduction) may perform
REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")
