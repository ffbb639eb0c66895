"""fuse: Inductor's scheduler fusion on scheduled graphs.

Greedy, like `Scheduler.fuse_nodes`: among pairs of nodes that may fuse, fuse the one that saves
the most memory traffic (bytes of buffers both read, plus the intermediate read, plus its write
when no one else reads it), then look again. A pair may fuse when both are kernels on one
device, their iterations share a loop nest (see iteration.py), no path leads from one to the
other through a third node (that node would have to run in the middle), and every read of the
earlier node's output by the later one is at the index it was stored at: such a load becomes the
stored SSA value, and the store goes when nothing outside the fused node reads the buffer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import sympy
from mind.ir.core import Block, Module, Operation, Region, Value
from mind.ir.types import TensorType

from .deps import equal, kind, product, set_node_deps
from .iteration import Join, join
from .loops_utils import substitute
from .manager import Pass, register_pass
from .schedule import copy_body_op, renumber

#: the value symbolic sizes take when estimating bytes (Inductor uses size hints)
SIZE_HINT = 8192


def reads(op: Operation) -> list[Value]:
    """The graph values an op reads: a node's loaded buffers, a call's or output's operands."""
    if op.name == "scheduled.node":
        values = [b.args[0] for b in op.body.ops if kind(b) == "load"]
    else:
        values = op.operands
    return list(dict.fromkeys(values))


def _readers(ops: list[Operation]) -> dict[Value, list[Operation]]:
    readers: dict[Value, list[Operation]] = defaultdict(list)
    for op in ops:
        for value in reads(op):
            readers[value].append(op)
    return readers


def nbytes(value: Value) -> int:
    t = value.type
    assert isinstance(t, TensorType)
    numel = sympy.sympify(product(list(t.shape)))
    return int(numel.subs({s: SIZE_HINT for s in numel.free_symbols})) * t.dtype.itemsize


def score(a: Operation, b: Operation, readers: dict[Value, list[Operation]], read_sets) -> int:
    """Bytes of memory traffic that fusing `a` (earlier) with `b` saves."""
    ra, rb = read_sets[a], read_sets[b]
    total = sum(nbytes(v) for v in ra & rb)
    for value in a.results:
        if value in rb:
            only_ours = all(r in (a, b) for r in readers[value])
            total += nbytes(value) * (2 if only_ours else 1)
    return total


def creates_cycle(a: Operation, b: Operation, readers, position) -> bool:
    """Whether `b` depends on `a` through a node outside the pair."""
    stack = [r for v in a.results for r in readers[v] if r is not b]
    seen: set[Operation] = set()
    while stack:
        op = stack.pop()
        if op is b:
            return True
        if op in seen or op not in position or position[op] > position[b]:
            continue
        seen.add(op)
        stack += [r for v in op.results for r in readers[v]]
    return False


def plan(a: Operation, b: Operation) -> Join | None:
    """How `a` and `b` share a loop nest, or None when they may not fuse."""
    if a.attrs["device"] != b.attrs["device"]:
        return None
    shared = join(a.attrs["sizes"], b.attrs["sizes"])
    if shared is None:
        return None
    stored = {
        s.args[0]: substitute(s.args[1], shared.first) for s in a.body.ops if kind(s) == "store"
    }
    for load in b.body.ops:
        if kind(load) != "load" or load.args[0] not in a.results:
            continue
        if "mask" in load.attrs or "indirect" in load.attrs:
            return None
        if not equal(substitute(load.args[1], shared.second), stored[load.args[0].name]):
            return None
    return shared


def _dce(ops: list[Operation]) -> list[Operation]:
    used: set[Value] = set()
    kept = []
    for op in reversed(ops):
        if kind(op) == "store" or any(r in used for r in op.results):
            kept.append(op)
            used.update(op.operands)
    return kept[::-1]


def fuse_pair(a: Operation, b: Operation, shared: Join, readers) -> Operation:
    """One node running `a`'s body then `b`'s over the shared loops."""
    buffers = {v.name: v for v in a.results + b.results}
    body_map: dict[Value, Value] = {}
    stored: dict[str, Value] = {}
    forwarded: set[str] = set()
    ops: list[Operation] = []
    for part, mapping in ((a, shared.first), (b, shared.second)):
        for op in part.body.ops:
            if part is b and kind(op) == "load" and op.args[0] in a.results:
                body_map[op.result] = stored[op.args[0].name]
                forwarded.add(op.args[0].name)
                continue
            ops.append(copy_body_op(op, body_map, lambda e, m=mapping: substitute(e, m)))
            if kind(op) == "store":
                stored[op.args[0]] = ops[-1].args[2]
    dropped = {n for n in forwarded if all(r in (a, b) for r in readers[buffers[n]])}
    ops = _dce([op for op in ops if not (kind(op) == "store" and op.args[0] in dropped)])
    attrs = {
        "sizes": shared.sizes,
        "device": a.attrs["device"],
        "origins": sorted({*a.attrs["origins"], *b.attrs["origins"]}),
    }
    node = Operation(
        "scheduled.node",
        attrs=attrs,
        regions=[Region(Block(ops=renumber(ops)))],
        symbol=f"{a.symbol}_{b.symbol}",
        loc=a.loc,
    )
    node.results = [buffers[op.args[0]] for op in ops if kind(op) == "store"]
    for value in node.results:
        value.owner = node
    set_node_deps(node)
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
    block.ops = [*order, terminator]


def best_fusion(graph: Operation, max_parts: int) -> tuple[Operation, Operation, Join] | None:
    """The legal pair with the highest score (ties: the closest, then the earliest)."""
    ops = graph.body.ops
    readers = _readers(ops)
    position = {op: i for i, op in enumerate(ops)}
    nodes = [op for op in ops if op.name == "scheduled.node"]
    read_sets = {op: set(reads(op)) for op in nodes}
    best, best_key = None, None
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            if a.symbol.count("_") + b.symbol.count("_") + 2 > max_parts:
                continue
            key = (score(a, b, readers, read_sets), position[a] - position[b])
            if key[0] <= 0 or (best_key is not None and key <= best_key):
                continue
            if creates_cycle(a, b, readers, position):
                continue
            shared = plan(a, b)
            if shared is not None:
                best, best_key = (a, b, shared), key
    return best


def fuse_graph(graph: Operation, max_parts: int = 64) -> None:
    while (found := best_fusion(graph, max_parts)) is not None:
        a, b, shared = found
        node = fuse_pair(a, b, shared, _readers(graph.body.ops))
        block = graph.body
        block.insert_before(a, node)
        a.erase()
        b.erase()
        toposort(block)


@register_pass
@dataclass(frozen=True)
class Fuse(Pass):
    """`max-fusion-size` caps the nodes in one kernel (Inductor's config.max_fusion_size)."""

    name = "fuse"
    input = "scheduled"
    output = "scheduled"
    summary = "fuse scheduler nodes with compatible loops, most bytes saved first"

    max_fusion_size: int = 64

    def run(self, module: Module) -> Module:
        for graph in module.ops:
            fuse_graph(graph, self.max_fusion_size)
        return module
