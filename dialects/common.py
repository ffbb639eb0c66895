"""Ops that several dialects declare alike: graphs and their outputs, ATen calls, constant
tensors, reinterpreted buffers. Each dialect registers the classes under its own prefix."""

from __future__ import annotations

from mind.ir.constraints import ANY, INDEX, LAID_OUT, NUMBER, TENSOR, list_of
from mind.ir.core import Operation, Value
from mind.ir.opdef import Op, Verifier, attr, operand, region, result, var_args, var_results
from mind.ir.registry import Dialect, VerifyError
from mind.ir.types import TensorType


class Graph(Op):
    """A graph; its entry block's arguments are the graph's inputs"""

    body = region()


class Output(Op):
    """The graph's outputs, in order"""

    values = var_args(ANY)


class Call(Op):
    """An ATen call (`@aten.mm.default`), run by ATen; keyword arguments are attributes"""

    values = var_args(ANY)
    outs = var_results()


class ConstantTensor(Op):
    """A tensor constant, its elements inline"""

    data = attr(list_of(NUMBER))
    result = result(TENSOR)


class Reinterpret(Op):
    """A buffer's memory with other sizes, strides and offset (no copy)"""

    buffer = operand(TENSOR)
    offset = attr(INDEX)
    result = result(LAID_OUT)


def is_buffer(value: Value) -> bool:
    """A graph input or a realized node: memory with a layout, read through flat offsets."""
    return isinstance(value.type, TensorType) and (
        value.type.strides is not None or not isinstance(value.owner, Operation)
    )


def verify_reinterpret(op: Reinterpret) -> None:
    """The same memory as a buffer, laid out as the result type says from the buffer's first
    element plus `offset`."""
    src, t = op.buffer, op.result.type
    if not is_buffer(src):
        raise VerifyError(f"'{op.name}' of '%{src.name}', which is not a buffer", op.loc)
    if t.dtype != src.type.dtype:
        raise VerifyError(f"type mismatch: '{op.name}' of {src.type.dtype} declared {t}", op.loc)


def verify_sole_reader(op: Operation, target: Value) -> None:
    """`op` updates `target` in place (a scatter): no other op may read it, nor may `op`'s own
    body (its loads and its stores would race), since the memory becomes `op`'s result."""
    for user in target.users:
        top = user.ancestor_in(op.parent) if op.parent is not None else user
        if top is target.owner:  # its producer naming it (a scheduled node's writes)
            continue
        if top is not op:
            name = f"@{top.symbol}" if top is not None and top.symbol else _named(top or user)
            raise VerifyError(
                f"'{op.name}' updates '%{target.name}' in place, which '{name}' also reads",
                op.loc,
            )
        if user is not op:  # an op of its body (a load)
            raise VerifyError(
                f"'{user.name}' reads '%{target.name}', which its '{op.name}' updates in place",
                user.loc,
            )


def _named(op: Operation) -> str:
    return f"%{op.results[0].name}" if op.results else op.name


def add_graph_ops(
    dialect: Dialect,
    output: type[Op] = Output,
    name: str = "graph",
    summary: str = "",
    verify: Verifier | None = None,
) -> None:
    """`<dialect>.graph @name(%arg: T, ...) { ... <dialect>.output(...) }`."""
    terminator = f"{dialect.name}.output"
    traits = dict(symbol=True, signature=True, terminator=terminator, **_summary(summary))
    dialect.add(name, Graph, verify=verify, **traits)
    dialect.add("output", output)


def add_memory_ops(dialect: Dialect, summary: str = "") -> None:
    """`constant_tensor` and `reinterpret`, as every stage after lowering has them."""
    dialect.add("constant_tensor", ConstantTensor, symbol=True)
    dialect.add("reinterpret", Reinterpret, verify=verify_reinterpret, **_summary(summary))


def _summary(text: str) -> dict:
    return {"summary": text} if text else {}
