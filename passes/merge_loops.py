"""merge-loops: Inductor's `Scheduler.merge_loops` after fusion.

Adjacent loops of a node merge when every index in its body sees them as one contiguous range
(x loops with x loops, r loops with r loops), so a contiguous `[4, 128]` pointwise kernel runs
one `[512]` loop. Then every MemoryDep is normalized on its own: `128*d0 + d1` over
`{d0: 4, d1: 128}` becomes `c0` over `{c0: 512}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.ir.core import Module, Operation

from .deps import INDEX_ARGS, index_ops, kind, merge_dims, normalize_dep, set_node_deps, unique
from .loops_utils import pvar, substitute
from .manager import Pass, register_pass

DEP_KEYS = ("writes", "unmet", "met")


def merge_node_loops(op: Operation) -> None:
    """Merge a node's loops in place, rewriting its body's indexes and its sizes."""
    xs, rs = op.attrs["sizes"]
    targets = list(index_ops(op.body.ops))
    indexes = [t.args[INDEX_ARGS[kind(t)]] for t in targets]
    indexes, x_dims = merge_dims(indexes, [(pvar(k), s) for k, s in enumerate(xs)])
    indexes, r_dims = merge_dims(indexes, [(pvar(len(xs) + k), s) for k, s in enumerate(rs)])
    rename = {v: pvar(k) for k, (v, _) in enumerate(x_dims + r_dims)}
    for target, index in zip(targets, indexes):
        target.args[INDEX_ARGS[kind(target)]] = substitute(index, rename)
    op.attrs["sizes"] = ([s for _, s in x_dims], [s for _, s in r_dims])


def normalize_deps(op: Operation) -> None:
    for key in DEP_KEYS:
        op.attrs[key] = unique([normalize_dep(d) for d in op.attrs[key]])


@register_pass
@dataclass(frozen=True)
class MergeLoops(Pass):
    name = "merge-loops"
    input = "scheduled"
    output = "scheduled"
    summary = "merge contiguous loops of each node and normalize its MemoryDeps"

    def run(self, module: Module) -> Module:
        for graph in module.ops:
            for op in graph.body.ops:
                if op.name == "scheduled.node":
                    merge_node_loops(op)
                    set_node_deps(op)
                if op.name in ("scheduled.node", "scheduled.extern"):
                    normalize_deps(op)
        return module
