"""merge-loops: Inductor's `Scheduler.merge_loops` after fusion.

Adjacent loops of a node merge when every index in its body sees them as one contiguous range
(x loops with x loops, r loops with r loops), so a contiguous `[4, 128]` pointwise kernel runs
one `[512]` loop. Then every MemoryDep is normalized on its own: `128*d0 + d1` over
`{d0: 4, d1: 128}` becomes `c0` over `{c0: 512}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.analysis.deps import index_ops, merge_dims, normalize_dep, set_node_deps, unique
from mind.analysis.loops import pvar, substitute
from mind.dialects.scheduled import Extern, Node
from mind.ir.core import Operation

from .manager import GraphPass


def merge_node_loops(op: Node) -> None:
    """Merge a node's loops in place, rewriting its body's indexes and its sizes."""
    xs, rs = op.sizes
    targets = list(index_ops(op.body.ops))
    indexes = [t.index for t in targets]
    indexes, x_dims = merge_dims(indexes, [(pvar(k), s) for k, s in enumerate(xs)])
    indexes, r_dims = merge_dims(indexes, [(pvar(len(xs) + k), s) for k, s in enumerate(rs)])
    rename = {v: pvar(k) for k, (v, _) in enumerate(x_dims + r_dims)}
    for target, index in zip(targets, indexes):
        target.index = substitute(index, rename)
    op.sizes = ([s for _, s in x_dims], [s for _, s in r_dims])


def normalize_deps(op: Node | Extern) -> None:
    op.writes = unique([normalize_dep(d) for d in op.writes])
    op.unmet = unique([normalize_dep(d) for d in op.unmet])
    op.met = unique([normalize_dep(d) for d in op.met])


@dataclass(frozen=True)
class MergeLoops(GraphPass, name="merge-loops", input="scheduled"):
    """Merge contiguous loops of each node and normalize its MemoryDeps."""

    def run_graph(self, graph: Operation) -> None:
        for op in graph.body.ops:
            if isinstance(op, Node):
                merge_node_loops(op)
                set_node_deps(op)
            if isinstance(op, Node | Extern):
                normalize_deps(op)
