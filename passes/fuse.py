"""fuse: Inductor's scheduler fusion on scheduled graphs.

Greedy, like `Scheduler.fuse_nodes`: among pairs of nodes that may fuse, fuse the one that saves
the most memory traffic (bytes of buffers both read, plus the intermediate read, plus its write
when no one else reads it), then look again. A pair may fuse when both are kernels on one
device, their iterations share a loop nest (see analysis/iteration.py), no path leads from one to the
other through a third node (that node would have to run in the middle), and every read of the
earlier node's output by the later one is at the index it was stored at: such a load becomes the
stored SSA value, and the store goes when nothing outside the fused node reads the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.analysis.deps import equal, erase_dead, product, readers, reads, set_node_deps, size_hint
from mind.analysis.iteration import Join, join
from mind.analysis.loops import substitute
from mind.dialects.loops import Load
from mind.dialects.scheduled import Node, Store
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.types import TensorType

from .manager import GraphPass
from .schedule import copy_body_op, renumber


def nbytes(value: Value) -> int:
    """The buffer's size in bytes, symbolic sizes counted at their size hint."""
    t = value.type
    assert isinstance(t, TensorType)
    return size_hint(product(list(t.shape))) * t.dtype.itemsize


def score(a: Node, b: Node, block: Block, read_sets) -> int:
    """Bytes of memory traffic that fusing `a` (earlier) with `b` saves."""
    ra, rb = read_sets[a], read_sets[b]
    total = sum(nbytes(v) for v in ra & rb)
    for value in a.results:
        if value in rb:
            only_ours = readers(value, block) <= {a, b}
            total += nbytes(value) * (2 if only_ours else 1)
    return total


def creates_cycle(a: Node, b: Node, block: Block, position) -> bool:
    """Whether `b` depends on `a` through a node outside the pair."""
    stack = [r for v in a.results for r in readers(v, block) if r is not b]
    seen: set[Operation] = set()
    while stack:
        op = stack.pop()
        if op is b:
            return True
        if op in seen or op not in position or position[op] > position[b]:
            continue
        seen.add(op)
        stack += [r for v in op.results for r in readers(v, block)]
    return False


def shared_loops(a: Node, b: Node) -> Join | None:
    """How `a` and `b` share a loop nest, or None when they may not fuse."""
    if a.device != b.device:
        return None
    shared = join(a.sizes, b.sizes)
    if shared is None:
        return None
    stored = {
        s.buffer: substitute(s.index, shared.first) for s in a.body.ops if isinstance(s, Store)
    }
    for load in b.body.ops:
        if not isinstance(load, Load) or load.source not in a.results:
            continue
        if load.mask is not None or load.indirect is not None:
            return None
        if not equal(substitute(load.index, shared.second), stored[load.source]):
            return None
    return shared


def fuse_pair(a: Node, b: Node, shared: Join, block: Block) -> Node:
    """One node running `a`'s body then `b`'s over the shared loops, in place of both: a load
    in `b` of what `a` stores becomes the stored value, and a store nobody else reads goes."""
    forwarded = {load.source for load in b.body.ops if isinstance(load, Load)} & set(a.results)
    dropped = {v for v in forwarded if readers(v, block) <= {a, b}}
    stores = [s for part in (a, b) for s in part.body.ops if isinstance(s, Store)]
    kept = [s.buffer for s in stores if s.buffer not in dropped]
    node = Node.build(
        "scheduled.node",
        sizes=shared.sizes,
        device=a.device,
        origins=sorted({*(a.origins or []), *(b.origins or [])}),
        results=[v.type for v in kept],
        names=[v.name for v in kept],
        regions=[Region()],
        symbol=f"{a.symbol}_{b.symbol}",
        loc=a.loc,
    )
    body_map: dict[Value, Value] = dict(zip(kept, node.results))
    stored: dict[Value, Value] = {}
    ops: list[Operation] = []
    for part, mapping in ((a, shared.first), (b, shared.second)):
        for op in part.body.ops:
            if part is b and isinstance(op, Load) and op.source in forwarded:
                body_map[op.result] = stored[op.source]
            elif isinstance(op, Store) and op.buffer in dropped:
                stored[op.buffer] = body_map[op.value]
            else:
                ops.append(copy_body_op(op, body_map, lambda e, m=mapping: substitute(e, m)))
                if isinstance(op, Store):
                    stored[op.buffer] = ops[-1].value
    for op in ops:
        node.body.append(op)
    erase_dead(node.body)
    renumber(node.body.ops)
    set_node_deps(node)
    block.insert_before(a, node)
    for old, new in zip(kept, node.results):
        old.replace_all_uses_with(new)
    a.erase()
    b.erase()
    return node


def toposort(block: Block) -> None:
    """Reorder a graph's ops so every value is defined before use, keeping the order otherwise."""
    *ops, terminator = block.ops
    producer = {v: op for op in ops for v in op.results}
    needs = {op: {producer[v] for v in reads(op) if v in producer} for op in ops}
    order: list[Operation] = []
    done: set[Operation] = set()
    while len(order) < len(ops):
        op = next(o for o in ops if o not in done and needs[o] <= done)
        order.append(op)
        done.add(op)
    block.reorder([*order, terminator])


def best_fusion(graph: Operation, max_parts: int) -> tuple[Node, Node, Join] | None:
    """The legal pair with the highest score (ties: the closest, then the earliest)."""
    block = graph.body
    position = {op: i for i, op in enumerate(block.ops)}
    nodes = [op for op in block.ops if isinstance(op, Node)]
    read_sets = {op: set(reads(op)) for op in nodes}
    best, best_key = None, None
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            if a.symbol.count("_") + b.symbol.count("_") + 2 > max_parts:
                continue
            key = (score(a, b, block, read_sets), position[a] - position[b])
            if key[0] <= 0 or (best_key is not None and key <= best_key):
                continue
            if creates_cycle(a, b, block, position):
                continue
            shared = shared_loops(a, b)
            if shared is not None:
                best, best_key = (a, b, shared), key
    return best


def fuse_graph(graph: Operation, max_parts: int = 64) -> None:
    while (found := best_fusion(graph, max_parts)) is not None:
        fuse_pair(*found, graph.body)
        toposort(graph.body)


@dataclass(frozen=True)
class Fuse(GraphPass, name="fuse", input="scheduled"):
    """Fuse scheduler nodes with compatible loops, most bytes saved first.

    `max-fusion-size` caps the nodes in one kernel (Inductor's config.max_fusion_size)."""

    max_fusion_size: int = 64

    def run_graph(self, graph: Operation) -> None:
        fuse_graph(graph, self.max_fusion_size)
