"""reorder-collectives: order a scheduled graph so that each collective starts as early and is
waited for as late as the dependencies allow, and the communication runs while kernels compute
(Inductor's `raise_comms`, `sink_waits` and `reorder_compute_for_overlap`, as one list schedule).

The ops are placed one at a time, each once what it reads is placed: of those ready, a start
first, then any other op, and a wait only when nothing else is ready; ties go to the earlier op
of the original order. So compute that needs no pending result runs before the wait, and what
reads a wait's result moves with it. Two orders stay as they were: the starts' (every rank must
issue collectives in the same order, and a rank that runs a graph eagerly issues them in the
original order) and the ATen calls' (one may draw random numbers). The graphs are functional
(AOTAutograd functionalizes them: no op writes memory another reads), so any such order computes
what the original did; to-triton keeps a collective's inputs alive until its wait.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from mind.dialects.collectives import Start, WaitTensor
from mind.dialects.scheduled import Extern
from mind.ir.core import Operation

from .manager import GraphPass

#: what goes first among the ops that are ready: starts, then other ops, then waits
_STARTS, _OTHERS, _WAITS = range(3)


def _rank(op: Operation) -> int:
    return _STARTS if isinstance(op, Start) else _WAITS if isinstance(op, WaitTensor) else _OTHERS


def _predecessors(ops: list[Operation]) -> dict[Operation, set[Operation]]:
    """The ops each op must follow: the producers of what it (or its body) reads, and the
    previous start and previous ATen call for those."""
    inside = set(ops)
    before: dict[Operation, set[Operation]] = {}
    last: dict[type, Operation] = {}
    for op in ops:
        values = {v for inner in op.walk() for v in inner.operands}
        before[op] = {v.owner for v in values if v.owner in inside and v.owner is not op}
        for kind in (Start, Extern):
            if isinstance(op, kind):
                if kind in last:
                    before[op].add(last[kind])
                last[kind] = op
    return before


def overlap_order(ops: list[Operation]) -> list[Operation]:
    """`ops` (a graph's body without its terminator) in the order described above."""
    position = {op: i for i, op in enumerate(ops)}
    before = _predecessors(ops)
    waiting = {op: len(deps) for op, deps in before.items()}
    after: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op, deps in before.items():
        for dep in deps:
            after[dep].append(op)
    ready: list[tuple[int, int]] = []
    for op in ops:
        if not waiting[op]:
            heapq.heappush(ready, (_rank(op), position[op]))
    order: list[Operation] = []
    while ready:
        op = ops[heapq.heappop(ready)[1]]
        order.append(op)
        for user in after[op]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, (_rank(user), position[user]))
    return order


@dataclass(frozen=True)
class ReorderCollectives(GraphPass, name="reorder-collectives", input="scheduled"):
    """Start collectives as early and wait for them as late as dependencies allow."""

    def run_graph(self, graph: Operation) -> None:
        block = graph.body
        *ops, terminator = block.ops
        if any(isinstance(op, Start | WaitTensor) for op in ops):
            block.reorder([*overlap_order(ops), terminator])
