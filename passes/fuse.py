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

import heapq
import itertools
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
    a.erase()  # first, so that the uses they and their bodies hold need no rewriting
    b.erase()
    for old, new in zip(kept, node.results):
        old.replace_all_uses_with(new)
    return node


def toposort(block: Block, start: int, stop: int) -> None:
    """Reorder `block.ops[start:stop]` so every value is defined before use, keeping the order
    otherwise (each time, the first op whose inputs are ready), when the ops outside the range
    are in order and read nothing it defines out of order. After a fusion the range from the
    fused node to where its later part was is all that can be out of order."""
    window = block.ops[start:stop]
    index = {op: i for i, op in enumerate(window)}
    waiting = [0] * len(window)
    users: list[list[int]] = [[] for _ in window]
    for i, op in enumerate(window):
        for j in {index[v.owner] for v in reads(op) if v.owner in index}:
            waiting[i] += 1
            users[j].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order: list[Operation] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(window[i])
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    assert len(order) == len(window), "a cycle among scheduled nodes"
    block.reorder(order, start)


class FusionSearch:
    """The greedy order of `best_fusion`, without scanning every pair each time. Only nodes that
    share a buffer can save traffic, so the candidates are those pairs, in a heap by score.
    A pair's score does not change while both nodes live (another fusion renames the buffers
    they share, not their sizes, and leaves who else reads them), and a pair that may not fuse
    never may again (a path through a third node only grows, loops are the nodes' own): so the
    top-score pairs are taken out, ordered by their distance now, tried in turn, and the rest
    put back."""

    def __init__(self, graph: Operation, max_parts: int):
        self.block = graph.body
        self.max_parts = max_parts
        self.heap: list[tuple[int, int, Node, Node]] = []
        self.count = itertools.count()
        self.read_sets: dict[Operation, set[Value]] = {}
        self.position: dict[Operation, int] = {}
        self.renumber(0)
        for node in self.block.ops:
            if isinstance(node, Node):
                self.add(node)

    def renumber(self, start: int) -> None:
        for i in range(start, len(self.block.ops)):
            self.position[self.block.ops[i]] = i

    def add(self, node: Node) -> None:
        """Make `node` a candidate with every earlier candidate it shares a buffer with."""
        partners = {
            op
            for v in {*reads(node), *node.results}
            for op in (*readers(v, self.block), v.owner)
            if op in self.read_sets
        }
        for op in (node, *partners):  # the partners reading `node` read its new results
            self.read_sets[op] = set(reads(op))
        for other in partners:
            a, b = sorted((other, node), key=self.position.__getitem__)
            if a.symbol.count("_") + b.symbol.count("_") + 2 > self.max_parts:
                continue
            gain = score(a, b, self.block, self.read_sets)
            if gain > 0:
                heapq.heappush(self.heap, (-gain, next(self.count), a, b))

    def best(self) -> tuple[Node, Node, Join] | None:
        """The legal pair with the highest score (ties: the closest, then the earliest)."""
        while self.heap:
            top = self.heap[0][0]
            tied = []
            while self.heap and self.heap[0][0] == top:
                entry = heapq.heappop(self.heap)
                if entry[2].parent is self.block and entry[3].parent is self.block:
                    tied.append(entry)
            tied.sort(key=self.closest_first)
            for k, (_, _, x, y) in enumerate(tied):
                a, b = sorted((x, y), key=self.position.__getitem__)
                if creates_cycle(a, b, self.block, self.position):
                    continue
                shared = shared_loops(a, b)
                if shared is not None:
                    for entry in tied[k + 1 :]:
                        heapq.heappush(self.heap, entry)
                    return a, b, shared
        return None

    def closest_first(self, entry: tuple[int, int, Node, Node]) -> tuple[int, int]:
        first, second = sorted((self.position[entry[2]], self.position[entry[3]]))
        return second - first, first

    def fuse(self, a: Node, b: Node, shared: Join) -> None:
        start, stop = self.position[a], self.position[b]
        node = fuse_pair(a, b, shared, self.block)
        for gone in (a, b):
            del self.read_sets[gone], self.position[gone]
        toposort(self.block, start, stop)
        self.renumber(start)
        self.add(node)


def best_fusion(graph: Operation, max_parts: int) -> tuple[Node, Node, Join] | None:
    """The legal pair with the highest score (ties: the closest, then the earliest)."""
    return FusionSearch(graph, max_parts).best()


def fuse_graph(graph: Operation, max_parts: int = 64) -> None:
    search = FusionSearch(graph, max_parts)
    while (found := search.best()) is not None:
        search.fuse(*found)


@dataclass(frozen=True)
class Fuse(GraphPass, name="fuse", input="scheduled"):
    """Fuse scheduler nodes with compatible loops, most bytes saved first.

    `max-fusion-size` caps the nodes in one kernel (Inductor's config.max_fusion_size)."""

    max_fusion_size: int = 64

    def run_graph(self, graph: Operation) -> None:
        fuse_graph(graph, self.max_fusion_size)
