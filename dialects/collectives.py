"""Collectives: torch's functional collectives (`torch.ops._c10d_functional`) as ops of every
stage from aten to triton, each dialect registering them under its own prefix
(`aten.all_reduce`, `loops.all_reduce`, ..., `triton.wait_tensor`).

A collective is two ops, as torch traces it. The start issues the communication and gives the
pending result: a buffer that nothing may read but a `wait_tensor` (or the graph's output, for a
caller that waits later). The wait gives the same memory, ready:

    %buf1 = scheduled.all_reduce(%buf0) {reduce_op = "sum", group_name = "0"} : f32[8][1]cpu
    ...                                   // compute that does not need %buf1 overlaps it
    %buf2 = scheduled.wait_tensor(%buf1) : f32[8][1]cpu

Attributes are the schema's arguments by name: `group_name` is the process group as torch names
it (`dist.group.WORLD.group_name`, "0" for the default group), resolved by torch when the start
runs; `reduce_op` is torch's reduce op string. Every op is a start but `wait_tensor`; a start's
torch op is `_c10d_functional.<kind>.default`. No torch here: loops, scheduled and triton IR load
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import sympy
from mind.ir.constraints import INDEX, INT, LAID_OUT, STR, TENSOR, list_of, one_of, value
from mind.ir.core import Operation, Value
from mind.ir.opdef import Op, attr, operand, result, var_args, var_results
from mind.ir.registry import Dialect, VerifyError
from mind.ir.symbols import IntLike, as_int_like

#: the reduce ops torch's functional collectives accept (c10d's `str_to_reduce_op`)
REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")
#: the torch namespace of the functional collectives
NAMESPACE = "_c10d_functional"
WAIT = "wait_tensor"

Shape = tuple[IntLike, ...]


class Start(Op):
    """Base of the collectives that start communication; each declares its fields in the order
    of torch's schema, and `result_shape` says the result's shape for an input of `shape`."""

    def result_shape(self, shape: Shape) -> Shape:
        return shape

    def pairs(self) -> Iterator[tuple[Value, Value]]:
        """(input, result) for each tensor the collective communicates."""
        return zip(self.operands, self.results)


class AllReduce(Start):
    """Start reducing the input across the group: every rank gets the reduction"""

    input = operand(TENSOR)
    reduce_op = attr(one_of(*REDUCE_OPS))
    group_name = attr(STR)
    result = result(LAID_OUT)


class AllReduceCoalesced(Start):
    """Start all_reduce of several inputs as one collective"""

    inputs = var_args(value(TENSOR))
    reduce_op = attr(one_of(*REDUCE_OPS))
    group_name = attr(STR)
    outs = var_results(LAID_OUT)


class AllGather(Start):
    """Start gathering every rank's input, concatenated along dim 0"""

    input = operand(TENSOR)
    group_size = attr(INT)
    group_name = attr(STR)
    result = result(LAID_OUT)

    def result_shape(self, shape: Shape) -> Shape:
        return _dim0(shape, lambda n: n * self.group_size)


class AllGatherCoalesced(Start):
    """Start all_gather_into_tensor of several inputs as one collective"""

    inputs = var_args(value(TENSOR))
    group_size = attr(INT)
    group_name = attr(STR)
    outs = var_results(LAID_OUT)

    result_shape = AllGather.result_shape


class ReduceScatter(Start):
    """Start reducing the input across the group, each rank keeping its slice of dim 0"""

    input = operand(TENSOR)
    reduce_op = attr(one_of(*REDUCE_OPS))
    group_size = attr(INT)
    group_name = attr(STR)
    result = result(LAID_OUT)

    def result_shape(self, shape: Shape) -> Shape:
        return _dim0(shape, lambda n: sympy.sympify(n) / self.group_size)


class ReduceScatterCoalesced(Start):
    """Start reduce_scatter_tensor of several inputs as one collective"""

    inputs = var_args(value(TENSOR))
    reduce_op = attr(one_of(*REDUCE_OPS))
    group_size = attr(INT)
    group_name = attr(STR)
    outs = var_results(LAID_OUT)

    result_shape = ReduceScatter.result_shape


class AllToAll(Start):
    """Start exchanging slices of dim 0 with every rank (all sizes equal when the lists are empty)"""

    input = operand(TENSOR)
    output_split_sizes = attr(list_of(INDEX))
    input_split_sizes = attr(list_of(INDEX))
    group_name = attr(STR)
    result = result(LAID_OUT)

    def result_shape(self, shape: Shape) -> Shape:
        splits = self.output_split_sizes
        return _dim0(shape, lambda n: sum(splits) if splits else n)


class Broadcast(Start):
    """Start sending rank `src`'s input to every rank"""

    input = operand(TENSOR)
    src = attr(INT)
    group_name = attr(STR)
    result = result(LAID_OUT)


class WaitTensor(Op):
    """Wait for a collective: its result is the start's buffer, now readable"""

    tensor = operand(LAID_OUT)
    result = result(LAID_OUT)


def _dim0(shape: Shape, fn: Callable[[IntLike], IntLike]) -> Shape:
    if not shape:
        return shape
    return (as_int_like(fn(shape[0])), *shape[1:])


#: each start by its torch name (`_c10d_functional.<kind>`)
STARTS: dict[str, type[Start]] = {
    "all_reduce": AllReduce,
    "all_reduce_coalesced": AllReduceCoalesced,
    "all_gather_into_tensor": AllGather,
    "all_gather_into_tensor_coalesced": AllGatherCoalesced,
    "reduce_scatter_tensor": ReduceScatter,
    "reduce_scatter_tensor_coalesced": ReduceScatterCoalesced,
    "all_to_all_single": AllToAll,
    "broadcast": Broadcast,
}
#: every collective op by its torch name
KINDS: tuple[str, ...] = (*STARTS, WAIT)


def is_start(op: Operation | None) -> bool:
    return isinstance(op, Start)


def is_wait(op: Operation | None) -> bool:
    return isinstance(op, WaitTensor)


def is_collective(op: Operation | None) -> bool:
    return isinstance(op, Start | WaitTensor)


def torch_target(kind: str) -> str:
    """The torch op a collective runs: `_c10d_functional.all_reduce.default`."""
    return f"{NAMESPACE}.{kind}.default"


def call_args(op: Start | WaitTensor) -> list:
    """The torch op's positional arguments: the op's inputs, as one list when it takes several
    (`all_reduce_coalesced(inputs: Tensor[], ...)`); its attributes are the keyword arguments."""
    return [list(op.args)] if op.decl.variadic_args else list(op.args)


def waits_of(op: Start) -> list[WaitTensor]:
    """The waits of a start's results, in no particular order."""
    return [u for r in op.results for u in r.users if isinstance(u, WaitTensor)]


def _verify_start(op: Start) -> None:
    """One result per input, of its dtype and the kind's shape; each result pending: read by
    waits (and outputs) only."""
    if len(op.operands) != len(op.results):
        raise VerifyError(
            f"'{op.name}' gives one result per input: {len(op.operands)} inputs, "
            f"{len(op.results)} results",
            op.loc,
        )
    if getattr(op, "group_size", 1) < 1:
        raise VerifyError(f"'{op.name}' needs a group_size of at least 1", op.loc)
    for source, out in op.pairs():
        expected = op.result_shape(source.type.shape)
        if source.type.dtype != out.type.dtype or tuple(expected) != tuple(out.type.shape):
            shown = ", ".join(map(str, expected))
            raise VerifyError(
                f"type mismatch: '{op.name}' of '%{source.name}' gives "
                f"{source.type.dtype}[{shown}], declared {out.type}",
                op.loc,
            )
        for user in out.users:
            if not isinstance(user, WaitTensor) and user.kind != "output":
                raise VerifyError(
                    f"'{user.name}' reads '%{out.name}' before its wait: a collective's "
                    f"result is read through '{op.dialect}.{WAIT}'",
                    user.loc,
                )


def _verify_wait(op: WaitTensor) -> None:
    """The wait of a start in this graph, or of a graph input (a collective started earlier)."""
    owner = op.tensor.owner
    if isinstance(owner, Operation) and not isinstance(owner, Start):
        raise VerifyError(
            f"'{op.name}' waits for '%{op.tensor.name}', which no collective started", op.loc
        )
    if op.result.type != op.tensor.type:
        raise VerifyError(
            f"type mismatch: '{op.name}' of {op.tensor.type} declared {op.result.type}", op.loc
        )


def add_collective_ops(dialect: Dialect) -> None:
    """The collectives under the dialect's prefix (aten, loops, scheduled, triton)."""
    for kind, cls in STARTS.items():
        dialect.add(kind, cls, verify=_verify_start)
    dialect.add(WAIT, WaitTensor, verify=_verify_wait)
