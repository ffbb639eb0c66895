"""The loops dialect: the graph after lowering, where every node says how to compute one element
of its tensor (Inductor's Pointwise / Reduction / views / buffers). See docs/IR.md.

A node whose result type has strides is realized (a buffer with that layout); one without is
recomputed by its consumers. Loads from buffers use flat offsets; loads from unrealized nodes and
views use one index expression per dim.
"""

from __future__ import annotations

import sympy
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value
from mind.ir.registry import Dialect, VerifyError, register_dialect, terminated_by
from mind.ir.types import ScalarType, TensorType

from .scalar_ops import REDUCTION_TYPES, register_scalar_ops


def is_buffer(value: Value) -> bool:
    """A graph input or a realized node: memory with a layout, read through flat offsets."""
    return isinstance(value.type, TensorType) and (
        value.type.strides is not None or not isinstance(value.owner, Operation)
    )


def is_realized(op: Operation) -> bool:
    return (
        bool(op.results)
        and isinstance(op.result.type, TensorType)
        and op.result.type.strides is not None
    )


def _tensor_result(op: Operation) -> TensorType:
    t = op.result.type
    if not isinstance(t, TensorType):
        raise VerifyError(f"'{op.name}' must produce a tensor, not {t}", op.loc)
    return t


def _verify_body(op: Operation) -> None:
    t = _tensor_result(op)
    term = op.body.terminator
    if term is None or not term.name.endswith(".yield"):
        raise VerifyError(f"'{op.name}' body must end with a yield", op.loc)
    yielded = term.args[0]
    if not isinstance(yielded, Value) or not isinstance(yielded.type, ScalarType):
        raise VerifyError(f"'{op.name}' must yield a scalar value", term.loc)
    kind = op.attrs.get("reduction_type")
    if kind is not None and kind not in REDUCTION_TYPES:
        raise VerifyError(
            f"unknown reduction_type '{kind}' (expected one of {', '.join(REDUCTION_TYPES)})",
            op.loc,
        )
    expected = dt.i64 if kind in ("argmax", "argmin") else t.dtype
    got = dt.b8 if kind in ("any", "all") else yielded.type.dtype
    if kind not in ("any", "all") and got != expected and kind not in ("argmax", "argmin"):
        raise VerifyError(
            f"type mismatch: '{op.name}' yields {got.name} for a {expected.name} result",
            term.loc,
        )


def _verify_view(op: Operation) -> None:
    src, index = op.args
    _tensor_result(op)
    if not isinstance(src, Value) or not isinstance(src.type, TensorType):
        raise VerifyError("'loops.view' reads a tensor value", op.loc)
    if not isinstance(index, list) or len(index) != src.type.rank:
        raise VerifyError(
            f"'loops.view' needs {src.type.rank} index expressions for its source", op.loc
        )


def _verify_load(op: Operation) -> None:
    src, index = op.args
    if not isinstance(src, Value) or not isinstance(src.type, TensorType):
        raise VerifyError(f"'{op.name}' reads a tensor value", op.loc)
    if is_buffer(src):
        if not isinstance(index, int | sympy.Expr):
            raise VerifyError(
                f"'{op.name}' from buffer '%{src.name}' takes a flat offset, not {index!r}", op.loc
            )
    elif not isinstance(index, list) or len(index) != src.type.rank:
        raise VerifyError(
            f"'{op.name}' from unrealized '%{src.name}' needs {src.type.rank} index expressions",
            op.loc,
        )
    if not isinstance(op.result.type, ScalarType) or op.result.type.dtype != src.type.dtype:
        raise VerifyError(
            f"type mismatch: '{op.name}' of {src.type.dtype.name} declared {op.result.type}",
            op.loc,
        )


def verify_reinterpret(op: Operation) -> None:
    """`reinterpret` (loops, scheduled, triton): the same memory as a buffer, laid out as the
    result type says from the buffer's first element plus `offset`."""
    src = op.args[0] if op.args else None
    t = op.result.type if op.results else None
    if not isinstance(src, Value) or not isinstance(src.type, TensorType):
        raise VerifyError(f"'{op.name}' reinterprets a tensor value", op.loc)
    if not is_buffer(src):
        raise VerifyError(f"'{op.name}' of '%{src.name}', which is not a buffer", op.loc)
    if not isinstance(t, TensorType) or t.strides is None:
        raise VerifyError(f"'{op.name}' needs a result type with strides, not {t}", op.loc)
    if t.dtype != src.type.dtype:
        raise VerifyError(
            f"type mismatch: '{op.name}' of {src.type.dtype.name} declared {t}", op.loc
        )
    if not isinstance(op.attrs.get("offset"), int | sympy.Expr):
        raise VerifyError(f"'{op.name}' needs an index expression `offset`", op.loc)


def register_body_ops(dialect: Dialect) -> None:
    """The ops of a loop body, shared with the scheduled dialect."""
    register_scalar_ops(dialect)
    dialect.op("load", args=("source", "index"), verify=_verify_load, summary="read one element")
    dialect.op("constant", args=("value",), summary="a scalar constant")
    dialect.op("index", args=("expr",), summary="the value of an index expression")
    dialect.op("cast", args=("x",), summary="convert to the result dtype")
    dialect.op("yield", args=("value",), results=0, summary="the element's value")


LOOPS = register_dialect(Dialect("loops"))
LOOPS.op(
    "graph", results=0, regions=1, symbol=True, signature=True, verify=terminated_by("loops.output")
)
LOOPS.op("output", variadic=True, results=0, summary="the graph's outputs")
LOOPS.op("pointwise", regions=1, verify=_verify_body, summary="one element per index")
LOOPS.op(
    "reduction",
    regions=1,
    attrs=("reduction_ranges", "reduction_type"),
    verify=_verify_body,
    summary="reduce the body's value over the reduction ranges",
)
LOOPS.op(
    "view", args=("source", "index"), verify=_verify_view, summary="reindex a tensor without memory"
)
LOOPS.op(
    "reinterpret",
    args=("buffer",),
    attrs=("offset",),
    verify=verify_reinterpret,
    summary="a buffer's memory with other sizes, strides and offset (no copy)",
)
LOOPS.op(
    "extern", variadic=True, symbol=True, summary="an ATen call with its own kernel (mm, conv)"
)
LOOPS.op(
    "fallback", variadic=True, results=None, symbol=True, summary="an ATen op without a lowering"
)
LOOPS.op("constant_tensor", symbol=True, attrs=("data",), summary="a tensor constant")
register_body_ops(LOOPS)
