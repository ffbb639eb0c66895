"""cse: common subexpression elimination in the bodies of scheduled nodes.

Fusion concatenates the bodies of the nodes it fuses, and each consumer body recomputes what it
inlined: a fused softmax loads its row and adds its mask four times, once per reduction and once
for the output. Here each op that computes what an earlier op of the same body computes (same
op, same operands, same attributes, same result types) is replaced by that earlier op:

    %0 = scheduled.load(%arg0_1, 16*p0 + p1) : f32
    %1 = scheduled.reduction(%0) {reduction_type = "max"} : f32
    %2 = scheduled.load(%arg0_1, 16*p0 + p1) : f32      // gone: its users read %0
    %3 = scheduled.sub(%2, %1) : f32

That is sound because a node's body is pure but for its stores, and no body loads a buffer its
own node writes (the verifier refuses it), so two loads of one address read one value. A looped
kernel still recomputes a shared value in each r-loop that needs it (analysis/phases.py), so
sharing never keeps a row alive across loops. Fewer ops make smaller kernels, faster to
generate and to compile, and dumps that read like the computation.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from mind.dialects.scheduled import Node
from mind.ir.attributes import op_key
from mind.ir.core import Block, Operation

from .manager import GraphPass
from .schedule import renumber


@dataclass(frozen=True)
class CSE(GraphPass, name="cse", input="scheduled"):
    """Share the ops of a node's body that compute the same value (after fusion)."""

    def run_graph(self, graph: Operation) -> None:
        for node in graph.body.ops:
            if isinstance(node, Node) and eliminate_common(node.body):
                renumber(node.body.ops)


def eliminate_common(body: Block) -> bool:
    """Replace each op computing what an earlier op of `body` computes; whether any was."""
    seen: dict[Hashable, Operation] = {}
    changed = False
    for op in list(body.ops):
        if not op.results or op.regions:
            continue
        key = op_key(op)
        if key is None:
            continue
        first = seen.setdefault(key, op)
        if first is not op:
            op.replace_by(list(first.results))
            changed = True
    return changed
