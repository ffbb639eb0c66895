"""How each family of reduction kinds (dialects/reductions.py) becomes block ops: in registers,
over a whole row (a persistent kernel), or carried block by block through an r-loop (a looped
kernel). The strategies read the family's accumulator; a new family is a new Accumulator.

In an r-loop each kind carries full [XBLOCK, R0_BLOCK] accumulators: `init` makes them, `step`
folds one more block in (masked lanes keep their value), `finish` reduces them across the block
after the loop.

In a cooperative kernel (codegen/cooperative.py) each program reduces its chunk of the row to
`partial` values, carried values as `finish` merges them, and every program of the row merges
all the chunks' partials with `finish`, laid along r. A partial may also say what its chunk's
registers already hold of the row's later ops (`Partial.reuse`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mind.dialects.reductions import REDUCTIONS, Arith, Reduction
from mind.dialects.scheduled import Reduction as ReductionOp
from mind.dialects.triton import dtype_of
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value

from .kernel import KernelBuilder, Scope


@dataclass
class Partial:
    """A chunk's share of a row: each value with what merges as nothing (the value a lane past
    the last chunk holds). `reuse`, given the merged results, answers the body's values it can
    give from the chunk's registers more cheaply than the body computes them (scheduled value ->
    kernel value)."""

    values: list[tuple[Value, float]]
    reuse: Callable[[list[Value]], dict[Value, Value]] = field(default=lambda merged: {})


class Accumulator:
    """A reduction family's block ops. Each method returns the reduction's result values (or
    the carried accumulators), one per result (or carried value)."""

    def rows(self, b: KernelBuilder, scope: Scope, op: ReductionOp) -> list[Value]:
        """The reduced values of whole rows held in registers."""
        raise NotImplementedError

    def init(self, b: KernelBuilder, scope: Scope, op: ReductionOp) -> list[Value]:
        raise NotImplementedError

    def step(
        self, b: KernelBuilder, scope: Scope, op: ReductionOp, acc: list[Value], mask
    ) -> list[Value]:
        raise NotImplementedError

    def finish(self, b: KernelBuilder, scope: Scope, op: ReductionOp, out: list[Value]):
        raise NotImplementedError

    def cooperates(self, op: ReductionOp) -> bool:
        """Whether `partial` gives `op`'s share of a row as f32 values (the workspace's type)."""
        return False

    def partial(self, b: KernelBuilder, scope: Scope, op: ReductionOp) -> Partial:
        """A chunk's share of the row."""
        raise NotImplementedError


def keep_masked(b: KernelBuilder, scope: Scope, new: list[Value], acc: list[Value], mask):
    """Masked lanes (past the row's end, past xnumel) keep the accumulator they had."""
    if mask is None:
        return new
    return [b.emit_op(scope, "where", [mask, n, a], dtype_of(a)) for n, a in zip(new, acc)]


def reduce_block(
    b: KernelBuilder, scope: Scope, values: list[Value], kind: Reduction, dtype: dt.DType
) -> Value:
    """`triton.reduce` (or `reduce_index`) of a full block along r, keeping r as size 1."""
    name = "reduce_index" if kind.is_index else "reduce"
    shape = b.tiling.groups[0].shape
    return b.emit(scope, name, [*values, 1], dtype, shape, {"reduction_type": kind.name})


class Blocks(Arith[Value]):
    """The two-result kinds' merges' arithmetic on kernel blocks of one dtype, reducing along r."""

    def __init__(self, b: KernelBuilder, scope: Scope, dtype: dt.DType):
        self.b, self.scope, self.dtype = b, scope, dtype

    def op(self, name: str, args: list[Value], predicate: bool = False) -> Value:
        return self.b.emit_op(self.scope, name, args, dt.b8 if predicate else self.dtype)

    def reduce(self, x: Value, kind: str) -> Value:
        return reduce_block(self.b, self.scope, [x], REDUCTIONS[kind], self.dtype)

    def constant(self, value: float) -> Value:
        return self.b.full(self.scope, value, self.dtype, (1,) * len(self.b.tiling.full_shape))


class Fold(Accumulator):
    """Plain and logical kinds: fold values with the kind's combine op (logical ones in b8)."""

    def rows(self, b, scope, op):
        kind, rdt = REDUCTIONS[op.reduction_type], op.result.type.dtype
        dtype = kind.accumulator(op.value.type.dtype, rdt)
        v = b.masked_input(scope, scope.values[op.value], kind.neutral(dtype), dtype)
        return [reduce_block(b, scope, [v], kind, rdt)]

    def init(self, b, scope, op):
        kind = REDUCTIONS[op.reduction_type]
        dtype = kind.accumulator(op.value.type.dtype, op.result.type.dtype)
        return [b.full(scope, kind.neutral(dtype), dtype, b.tiling.full_shape)]

    def step(self, b, scope, op, acc, mask):
        kind, dtype = REDUCTIONS[op.reduction_type], dtype_of(acc[0])
        v = b.masked_input(scope, scope.values[op.value], kind.neutral(dtype), dtype)
        new = b.emit_op(scope, kind.combine, [acc[0], v], dtype)
        return keep_masked(b, scope, [new], acc, mask)

    def finish(self, b, scope, op, out):
        return [reduce_block(b, scope, out, REDUCTIONS[op.reduction_type], op.result.type.dtype)]

    def cooperates(self, op):
        kind, rdt = REDUCTIONS[op.reduction_type], op.result.type.dtype
        return (
            kind.family == "plain" and kind.accumulator(op.value.type.dtype, rdt) == rdt == dt.f32
        )

    def partial(self, b, scope, op):
        return Partial(
            [(self.rows(b, scope, op)[0], REDUCTIONS[op.reduction_type].neutral(dt.f32))]
        )


class Best(Accumulator):
    """Index kinds (argmax, argmin): the best value and its position along r."""

    def rows(self, b, scope, op):
        kind, dtype = REDUCTIONS[op.reduction_type], op.value.type.dtype
        v = b.masked_input(scope, scope.values[op.value], kind.neutral(dtype), dtype)
        index = b.emit(scope, "broadcast_to", [b.r_index(scope)], dt.i64, b.tiling.full_shape)
        return [reduce_block(b, scope, [v, index], kind, op.result.type.dtype)]

    def init(self, b, scope, op):
        kind, dtype, full = REDUCTIONS[op.reduction_type], op.value.type.dtype, b.tiling.full_shape
        return [b.full(scope, kind.neutral(dtype), dtype, full), b.full(scope, 0, dt.i64, full)]

    def step(self, b, scope, op, acc, mask):
        kind, dtype = REDUCTIONS[op.reduction_type], dtype_of(acc[0])
        v = b.masked_input(scope, scope.values[op.value], kind.neutral(dtype), dtype)
        best = Operation(
            "triton.combine_index", [acc[0], acc[1], v, b.r_index(scope)],
            {"reduction_type": kind.name}, [acc[0].type, acc[1].type],
            [f"tmp{b.counter}", f"tmp{b.counter + 1}"],
        )  # fmt: skip
        b.counter += 2
        return keep_masked(b, scope, scope.block.append(best).results, acc, mask)

    def finish(self, b, scope, op, out):
        return [reduce_block(b, scope, out, REDUCTIONS[op.reduction_type], op.result.type.dtype)]


#: reduction family -> its accumulator (codegen/online_softmax.py adds its own)
ACCUMULATORS: dict[str, Accumulator] = {"plain": Fold(), "logical": Fold(), "index": Best()}


def accumulator(op: ReductionOp) -> Accumulator:
    return ACCUMULATORS[REDUCTIONS[op.reduction_type].family]
