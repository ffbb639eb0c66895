"""online-softmax: a row's max and its sum of exp(v - max) become one reduction.

Softmax and log_softmax reduce each row twice: `max(v)`, then `sum(exp(v' - max))`, where v' is
v computed again (a fused body recomputes rather than keeps a row). This pass makes each such
pair one `scheduled.reduction` of kind `online_softmax` with two results, (max, sum), as
Inductor's `online_softmax_reduce`:

    %1 = scheduled.reduction(%0) {reduction_type = "max"} : f32
    ... %4 = scheduled.exp(%3) ...  %5 = scheduled.reduction(%4) {reduction_type = "sum"} : f32
becomes
    %1, %2 = scheduled.reduction(%0) {reduction_type = "online_softmax"} : f32, f32

Code generation decides how to compute it (codegen/online_softmax.py): a looped kernel carries
the running max and the running sum, rescaled as the max grows, through one r-loop, so the row
is read twice instead of three times; a persistent kernel computes the max, then the sum, in
registers, as before the rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.analysis.deps import erase_dead
from mind.analysis.patterns import definitions, is_reduction, same, two_value_reduction
from mind.dialects.scheduled import Node
from mind.ir.core import Operation, Value

from .manager import GraphPass
from .schedule import renumber


@dataclass(frozen=True)
class OnlineSoftmax(GraphPass, name="online-softmax", input="scheduled"):
    """Fuse each max with its sum of exp(v - max) into one online_softmax reduction."""

    def run_graph(self, graph: Operation) -> None:
        for node in graph.body.ops:
            if isinstance(node, Node):
                rewrite_node(node)


def rewrite_node(node: Node) -> None:
    defs = definitions(node.body)
    pairs: dict[Operation, Operation] = {}  # max -> its sum
    for op in node.body.ops:
        top = _online_max(op, defs)
        if top is not None and top not in pairs:
            pairs[top] = op
    for top, total in pairs.items():
        fused = two_value_reduction(top, "online_softmax")
        top.replace_by([fused.results[0]])
        total.replace_by([fused.results[1]])
    if pairs:  # the reloads that go read what the reduction reads: the MemoryDeps stay
        erase_dead(node.body)
        renumber(node.body.ops)


def _online_max(op: Operation, defs: dict[Value, Operation]) -> Operation | None:
    """The max reduction whose result `op`, a sum, reads through exp(v' - max), else None."""
    if not is_reduction(op, "sum"):
        return None
    exp = defs.get(op.value)
    sub = defs.get(exp.x) if exp is not None and exp.kind == "exp" else None
    if sub is None or sub.kind != "sub":
        return None
    value, top = sub.a, defs.get(sub.b)
    if top is None or not is_reduction(top, "max"):
        return None
    dtypes = {v.type.dtype for v in (top.value, top.result, value, op.result)}
    if len(dtypes) != 1 or not dtypes.pop().is_floating_point:
        return None
    return top if same(value, top.value, defs) else None
