"""The scalar operations that loop bodies are made of, shared by the loops and scheduled
dialects (which register them under their own prefix) and by every consumer of bodies
(evaluator, code generator). One table: name -> how many operands, what dtype comes out."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from mind.ir.core import Operation, Value
from mind.ir.registry import Dialect, VerifyError
from mind.ir.types import ScalarType, dtype_name


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
    # `a`, asserting 0 <= a < b (an index read from a tensor; Inductor's indirect-index assert)
    "check_index": ScalarOp("check_index", 2),
}

#: reduction kinds a reduction node (or a scheduled.reduction) may perform
REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


def _dtypes(op: Operation) -> list:
    values = [a for a in op.args if isinstance(a, Value)]
    if len(values) != len(op.args):
        raise VerifyError(f"'{op.name}' takes SSA values only", op.loc)
    return [v.type.dtype for v in values]


def verify_scalar_op(op: Operation) -> None:
    """Operands share one dtype (promotion is explicit); the result is that dtype, or b8."""
    spec = SCALAR_OPS[op.name.split(".", 1)[1]]
    dtypes = _dtypes(op)
    if spec.name == "where":
        if dtypes[0] != torch.bool:
            raise VerifyError(
                f"type mismatch: '{op.name}' condition must be b8, got {dtype_name(dtypes[0])}",
                op.loc,
            )
        dtypes = dtypes[1:]
    if len(set(dtypes)) > 1:
        names = ", ".join(dtype_name(d) for d in dtypes)
        raise VerifyError(
            f"type mismatch: '{op.name}' operands have different dtypes ({names})", op.loc
        )
    expected = torch.bool if spec.result == "bool" else dtypes[0]
    result = op.result.type
    if not isinstance(result, ScalarType) or result.dtype != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' gives {dtype_name(expected)}, declared {result}", op.loc
        )


def register_scalar_ops(dialect: Dialect) -> None:
    """Register every scalar op under `dialect`'s prefix (`loops.add`, `scheduled.add`, ...)."""
    names = ("a", "b", "c")
    for spec in SCALAR_OPS.values():
        dialect.op(spec.name, args=names[: spec.arity], verify=verify_scalar_op)
