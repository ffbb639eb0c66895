"""combo-kernels: group independent pointwise nodes into combo kernels (Inductor's foreach and
combo kernels), so that one launch runs many small kernels: an optimizer step's per-parameter
updates, each its own node after the foreach ops split (passes/aten_rules/foreach.py), launch as
a few kernels where they took one or two launches per parameter.

Nodes are taken in order. A node joins the oldest open group where it could run where the
group's first node runs: it reads nothing made or overwritten since (by the group's nodes or by
ops between), and overwrites nothing read since; and a node that makes a buffer moves up past
no op that makes one (its buffer would be live beside theirs: hoisting each layer's recomputed
activation to the top of a backward graph would raise its peak memory). It then moves up beside
the group's other nodes, and each is marked `combo = k` (to-triton makes one kernel of them,
codegen/combo.py). A node that joins no group opens one; the `open-groups` latest stay open,
and a collective closes them all (reorder-collectives placed it). A group holds at most
`max-args` distinct kernel arguments (buffers), and only nodes whose own kernel would be one
1-D block of programs (a node tiled in 2-D for a transpose keeps its tile).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mind.analysis.deps import reads
from mind.analysis.views import bases
from mind.codegen.tiling import pointwise_tiling
from mind.dialects.collectives import KINDS
from mind.dialects.common import Reinterpret, memory_readers
from mind.dialects.scheduled import Node, combinable, overwritten_inputs
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value

from .manager import GraphPass, option

_COLLECTIVES = {f"scheduled.{kind}" for kind in KINDS}


def _candidate(op: Operation) -> bool:
    if not isinstance(op, Node) or not combinable(op):
        return False
    tiling = pointwise_tiling(op)
    return len(tiling.groups) == 1 and tiling.index_dtype == dt.i32


def _arguments(node: Node) -> set[Value]:
    """The buffers its kernel takes: what it reads, writes and overwrites."""
    return {*reads(node), *node.results, *overwritten_inputs(node)}


@dataclass
class _Group:
    """An open group: its nodes, and what the ops that run from its first node on (its nodes
    included, nodes moved up into earlier groups not) make, overwrite and are."""

    nodes: list[Node]
    args: set[Value]
    made: set[Value] = field(default_factory=set)
    overwritten: set[Value] = field(default_factory=set)
    ops: set[Operation] = field(default_factory=set)
    #: how many ops that make buffers, not the group's nodes, run from its first node on
    allocating: int = 0

    def passes(self, op: Operation, member: bool) -> None:
        """`op` runs from the group's first node on (one of its nodes when `member`)."""
        self.ops.add(op)
        self.made.update(op.results)
        self.overwritten.update(overwritten_inputs(op))
        self.allocating += bool(op.results) and not member

    def leaves(self, node: Node) -> None:
        """`node` moved up into an earlier group: it runs before this group's first node (what
        it makes and overwrites, no other op does: a graph input has one overwriter)."""
        self.ops.discard(node)
        self.made.difference_update(node.results)
        self.overwritten.difference_update(overwritten_inputs(node))
        self.allocating -= bool(node.results)

    def admits(self, node: Node, facts: _Facts, max_args: int) -> bool:
        """Whether `node` may run where the group's first node runs, beside its nodes."""
        if len(self.args | facts.args) > max_args or node.device != self.nodes[0].device:
            return False
        if node.results and self.allocating:  # its buffer would live beside theirs
            return False
        if facts.read & self.made or facts.read & self.overwritten:
            return False
        return not facts.readers & self.ops


def _is_view(op: Operation) -> bool:
    return isinstance(op, Reinterpret)


@dataclass(frozen=True)
class _Facts:
    """What a candidate node takes, reads (through views) and whose readers it overwrites under:
    computed once, asked of each open group."""

    args: frozenset[Value]
    read: frozenset[Value]
    readers: frozenset[Operation]

    @staticmethod
    def of(node: Node) -> _Facts:
        readers = {
            r for t in overwritten_inputs(node) for r in memory_readers(t, node.parent, _is_view)
        }
        read = {b for v in reads(node) for b in bases(v)}
        return _Facts(frozenset(_arguments(node)), frozenset(read), frozenset(readers))


@dataclass(frozen=True)
class ComboKernels(GraphPass, name="combo-kernels", input="scheduled"):
    """Run independent pointwise nodes as combo kernels: one launch for many nodes."""

    max_args: int = option(
        80,
        "the most buffers one combo kernel takes (an AdamW step over GPT-2's tensors on an H100:"
        " 1.22 ms in 12 kernels of up to 80, 1.54 ms in 4 of up to 250)",
    )
    open_groups: int = option(
        8,
        "how many groups a node may join, the latest opened: an optimizer step interleaves"
        " parameters' updates with updates of the state they read",
    )

    def run_graph(self, graph: Operation) -> None:
        groups: list[list[Node]] = []
        open_: list[_Group] = []  # oldest first
        for op in graph.body.ops:
            if op.name in _COLLECTIVES:
                open_ = []
                continue
            joined = None
            if _candidate(op):
                facts = _Facts.of(op)
                joined = next((g for g in open_ if g.admits(op, facts, self.max_args)), None)
                if joined is None:
                    joined = _Group([op], set(facts.args))
                    groups.append(joined.nodes)
                    open_ = [*open_, joined][-self.open_groups :]
                else:
                    joined.nodes.append(op)
                    joined.args |= facts.args
            for group in open_:
                group.passes(op, group is joined)
            if joined is not None:  # it runs before the groups opened after the one it joined
                for group in open_[open_.index(joined) + 1 :]:
                    group.leaves(op)
        _place([g for g in groups if len(g) > 1], graph)


def _place(groups: list[list[Node]], graph: Operation) -> None:
    """Number the groups and move each one's nodes up beside its first."""
    if not groups:
        return
    follow: dict[Operation, list[Node]] = {}
    moved: set[Operation] = set()
    for k, nodes in enumerate(groups):
        for node in nodes:
            node.combo = k
        follow[nodes[0]] = nodes[1:]
        moved.update(nodes[1:])
    order: list[Operation] = []
    for op in graph.body.ops:
        if op not in moved:
            order.append(op)
            order += follow.get(op, [])
    graph.body.reorder(order)
