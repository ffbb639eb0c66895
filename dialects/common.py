"""Ops that several dialects declare alike: graphs and their outputs, ATen calls, constant
tensors, reinterpreted buffers. Each dialect registers the classes under its own prefix."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import sympy
from mind.ir.constraints import ANY, INDEX, INT, LAID_OUT, NUMBER, STR, TENSOR, dict_of, list_of
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.opdef import (
    Op,
    Verifier,
    attr,
    operand,
    opt_attr,
    region,
    result,
    var_args,
    var_results,
)
from mind.ir.registry import Dialect, VerifyError
from mind.ir.symbols import IntLike
from mind.ir.types import TensorType


class Graph(Op):
    """A graph; its entry block's arguments are its inputs, `aligned` those always 16-byte aligned
    (by position: a model's parameters and buffers, which every call passes aligned), `hints`
    each size symbol's value where the graph was traced (heuristics choose for it:
    mind.ir.symbols.size_hint; the code is right at every size)"""

    body = region()
    aligned = opt_attr(list_of(INT))
    hints = opt_attr(dict_of(STR, INT))


def converted_graph(graph: Graph, name: str, block: Block, symbol: str | None = None) -> Graph:
    """The graph op `name` over `block` that a conversion makes of `graph`: its symbol (unless
    given), location and what it states of its inputs (`aligned`, `hints`)."""
    return Graph.build(
        name,
        regions=[Region(block)],
        symbol=symbol or graph.symbol,
        loc=graph.loc,
        aligned=graph.aligned,
        hints=graph.hints,
    )


def verify_aligned(op: Graph) -> None:
    """`aligned` lists tensor inputs."""
    args = op.body.args
    for i in op.aligned or ():
        if not 0 <= i < len(args) or not TENSOR(args[i].type):
            raise VerifyError(f"'{op.name}' aligned {i}, which is not a tensor input", op.loc)


def verify_hints(op: Graph) -> None:
    """`hints` are sizes: none negative."""
    for name, hint in (op.hints or {}).items():
        if hint < 0:
            raise VerifyError(f"'{op.name}' hints {name} = {hint}, which is no size", op.loc)


class Output(Op):
    """The graph's outputs, in order"""

    values = var_args(ANY)


class Call(Op):
    """An ATen call (`@aten.mm.default`), run by ATen; keyword arguments are attributes"""

    values = var_args(ANY)
    outs = var_results()


class ExternCall(Call):
    """An ATen call; `aliases` lists results that may be an argument's memory (a view)
    (by the op's schema: the others are memory ATen allocates); other attributes are keyword
    arguments"""

    aliases = opt_attr(list_of(INT))


def verify_aliases(op: ExternCall) -> None:
    """`aliases` lists tensor results."""
    for i in op.aliases or []:
        if not 0 <= i < len(op.results) or not TENSOR(op.results[i].type):
            raise VerifyError(f"'{op.name}' aliases {i}, which is not a tensor result", op.loc)


def aliased_memory(value: Value) -> list[Value]:
    """The tensor arguments whose memory `value` may be, where it is an extern call's result
    that `aliases` lists (the IR does not say which argument: ATen's schema does); none for
    any other value."""
    op = value.owner
    if not isinstance(op, ExternCall) or value not in [op.results[i] for i in op.aliases or ()]:
        return []
    return [v for v in op.operands if TENSOR(v.type)]


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


def uses_gpu(graph: Operation) -> bool:
    """Whether a graph (aten or loops) has a GPU tensor: an input, or a value its ops make."""
    values = (*graph.body.args, *(r for op in graph.body.ops for r in op.results))
    return any(
        isinstance(v.type, TensorType)
        and v.type.device is not None
        and v.type.device.type == "cuda"
        for v in values
    )


def is_graph_input(value: Value) -> bool:
    """An input of a graph: an argument of its entry block (node bodies have none)."""
    return isinstance(value.owner, Block)


def memory_readers(
    value: Value, block: Block, aliases: Callable[[Operation], bool]
) -> Iterator[Operation]:
    """The ops of `block` that read `value`'s memory: its users, and the readers of the ops
    that alias it or compute from it where read (`aliases`: views, unrealized nodes; calls
    that may return an argument's memory also read it)."""
    for user in value.users:
        top = user.ancestor_in(block)
        if top is None or top is value.owner:
            continue
        through = aliases(top)
        if through or isinstance(top, ExternCall) and top.aliases:
            for r in top.results:
                yield from memory_readers(r, block, aliases)
        if not through:
            yield top


def verify_overwrite(
    op: Operation,
    target: Value,
    written: IntLike,
    aliases: Callable[[Operation], bool],
    overwrites: Callable[[Operation], bool],
) -> None:
    """`op` overwrites graph input `target` in place (AOTAutograd's input mutations, kept in the
    graph), each element at flat offset `written`: its body reads the input only there (other
    lanes would see new values); the graph's ops read the input as it came, so every other op
    reading its memory (`memory_readers`) runs before `op`, and no other op overwrites it
    (`overwrites` tells); outputs hand the memory out, whatever it holds by then."""
    for load in op.body.ops:
        if load.kind == "load" and load.source is target:
            if load.indirect or sympy.expand(sympy.sympify(load.index) - written) != 0:
                raise VerifyError(
                    f"'{load.name}' reads '%{target.name}' at {load.index}, which its "
                    f"'{op.name}' overwrites at {written}",
                    load.loc,
                )
    block = op.parent
    if block is None:
        return
    position = {o: i for i, o in enumerate(block.ops)}
    for reader in memory_readers(target, block, aliases):
        if reader is op or isinstance(reader, Output):
            continue
        name = f"@{reader.symbol}" if reader.symbol else _named(reader)
        if overwrites(reader):
            raise VerifyError(f"'{op.name}' and '{name}' both overwrite '%{target.name}'", op.loc)
        if position[reader] > position[op]:
            raise VerifyError(
                f"'{op.name}' overwrites input '%{target.name}', which '{name}' reads after it",
                op.loc,
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
    dialect.add(name, Graph, verify=_verify_graph(verify), **traits)
    dialect.add("output", output)


def _verify_graph(verify: Verifier | None) -> Verifier:
    def check(op: Graph) -> None:
        verify_aligned(op)
        verify_hints(op)
        if verify is not None:
            verify(op)

    return check


def add_memory_ops(dialect: Dialect, summary: str = "") -> None:
    """`constant_tensor` and `reinterpret`, as every stage after lowering has them."""
    dialect.add("constant_tensor", ConstantTensor, symbol=True)
    dialect.add("reinterpret", Reinterpret, verify=verify_reinterpret, **_summary(summary))


def _summary(text: str) -> dict:
    return {"summary": text} if text else {}
