"""What rewrites of scheduled node bodies (passes/online_softmax.py, passes/welford.py) and the
strategies that rebuild them (passes/split_reductions.py, codegen/template.py) match on: the op defining
each body value, the ops a value depends on, and structural equality of values (a fused body
reloads and recomputes what it already has, so the same quantity appears as several values).
Also, in any dialect's bodies, what a mask ands together and whether a masked load's `other` is
a given number (passes/inline.py, codegen/template.py drop the `where` such a load makes
redundant)."""

from __future__ import annotations

import math

from mind.dialects.scheduled import Reduction
from mind.ir.core import Block, Operation, Value
from mind.ir.types import ScalarType


def definitions(body: Block) -> dict[Value, Operation]:
    """Each body value -> the op that defines it."""
    return {r: op for op in body.ops for r in op.results}


def conjuncts(mask: Value) -> set[Value]:
    """The mask and every value it ands together (`logical_and`, of any dialect), at any depth."""
    op = mask.owner
    if op is None or op.kind != "logical_and":
        return {mask}
    return {mask}.union(*(conjuncts(v) for v in op.operands))


def same_number(a: bool | int | float, b: bool | int | float) -> bool:
    """Equal numbers, zeros of the same sign (a load's `other` stands for a `where`'s)."""
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def closure(ops: list[Operation], targets: list[Operation]) -> list[Operation]:
    """The targets and every op of `ops` they depend on, in the order of `ops`."""
    defs = {r: op for op in ops for r in op.results}
    needed, stack = set(targets), list(targets)
    while stack:
        for value in stack.pop().operands:
            op = defs.get(value)
            if op is not None and op not in needed:
                needed.add(op)
                stack.append(op)
    return [op for op in ops if op in needed]


def is_reduction(op: Operation | None, kind: str) -> bool:
    return isinstance(op, Reduction) and op.reduction_type == kind


def two_value_reduction(anchor: Reduction, kind: str) -> Reduction:
    """A reduction of `kind` (online_softmax, welford: two values of `anchor`'s dtype) of what
    `anchor` reduces, inserted before it: the rewrites' replacement for a pair of reductions."""
    dtype = anchor.result.type.dtype
    op = Reduction.build(
        "scheduled.reduction",
        value=anchor.value,
        reduction_type=kind,
        results=[ScalarType(dtype), ScalarType(dtype)],
        loc=anchor.loc,
    )
    anchor.parent.insert_before(anchor, op)
    return op


def same(a, b, defs: dict[Value, Operation]) -> bool:
    """Structural equality of body values: the same ops on the same operands and attributes."""
    if isinstance(a, Value) or isinstance(b, Value):
        if a is b:
            return True
        x, y = defs.get(a), defs.get(b)
        return (
            x is not None
            and y is not None
            and x.name == y.name
            and x.results.index(a) == y.results.index(b)
            and [r.type for r in x.results] == [r.type for r in y.results]
            and same(x.args, y.args, defs)
            and same(dict(x.attrs), dict(y.attrs), defs)
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(u, v, defs) for u, v in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], defs) for k in a)
    return type(a) is type(b) and a == b
