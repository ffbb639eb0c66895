"""fuse: Inductor's scheduler fusion on scheduled graphs.

Greedy, like `Scheduler.fuse_nodes`: among pairs of nodes that may fuse, fuse the one that saves
the most memory traffic (bytes of buffers both read, plus the intermediate read, plus its write
when no one else reads it), then look again. A pair may fuse when both are kernels on one
device, their iterations share a loop nest (see analysis/iteration.py), no path leads from one to the
other through a third node (that node would have to run in the middle), and every read of the
earlier node's output by the later one is at the index it was stored at: such a load becomes the
stored SSA value, and the store goes when nothing outside the fused node reads the buffer.
Where that holds only with one node's loops in another order (a row-major pointwise node beside
a column reduction), that node's loops are permuted (analysis/loop_order.py). A matmul template
node takes pointwise work over its own loops only (its epilogue, see passes/mm_templates.py),
which stay as they are: an epilogue over another view of them (a GELU over the [8, 256, 3072]
view of a [2048, 3072] matmul) reads its loop variables off them (`keeping`). A
node that updates a buffer in place (a scatter) fuses with nothing: its target must be complete
before it starts, and its readers wait for all of it. A node that overwrites a graph input
(AOTAutograd's input mutations) fuses where no read of the input could come after its write.
Nor does a reduction that split-reductions will split (too few rows to fill the GPU) take work
that stores along its rows after it.

Each pair it weighs (the pairs that share a buffer) gets a remark, located at the later node:
fused and the bytes saved, or refused, by which rule (see RULES), and what it would have saved.
`mind-opt --pass=fuse --remarks` prints them; the `fusion` log carries them (MIND_LOGS=fusion).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass

from mind.analysis.deps import equal, erase_dead, product, readers, reads, set_node_deps
from mind.analysis.iteration import Join, Reorder, join, keeping
from mind.analysis.loop_order import contiguous_bytes, reorders
from mind.analysis.loops import pvar, simplify_with_ranges, substitute
from mind.analysis.rounding import compared, converts, rounds
from mind.dialects.common import Reinterpret, memory_readers
from mind.dialects.loops import Cast, Load
from mind.dialects.scheduled import Node, Store, overwritten_inputs
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import Diagnostic, emit, handled
from mind.ir.logs import channel
from mind.ir.symbols import IntLike, size_hint
from mind.ir.types import TensorType

from .manager import GraphPass, option
from .mm_templates import template_fusable
from .schedule import copy_body_op, renumber
from .split_reductions import SM_COUNT, wanted_parts

log = channel("fusion")

#: why a pair may not fuse, by rule: what the remark says (formatted only when reported)
RULES = {
    "max-fusion-size": "the kernel would hold {} nodes, over max-fusion-size={}",
    "cycle": "@{} depends on @{} through {}, which would have to run in the middle",
    "device": "they run on different devices ({} and {})",
    "iteration": "their iterations {} and {} share no loop nest",
    "template": "@{} is a matmul template: it takes work without reductions over its own loops,"
    " not @{}",
    "indirect-read": "@{} reads %{} through a mask or an indirect index",
    "in-place": "@{} updates %{} in place: its writes land in any order, so it runs alone",
    "overwrite": "@{} overwrites input %{}, which {} reads before it (elsewhere, or in another"
    " phase): fused, the read could come after",
    "index": "@{} reads %{} at {}, not where @{} stored it ({})",
    "split": "@{} splits its reduction of {} rows of {} (too few rows to fill the GPU); @{}"
    " would store along the rows after it, and a split leaves no row whole to store along",
}


@dataclass(frozen=True)
class Refusal:
    """A rule that keeps a pair apart, and what it found."""

    rule: str
    found: tuple

    def __str__(self) -> str:
        return f"({self.rule}): " + RULES[self.rule].format(*self.found)


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


def creates_cycle(a: Node, b: Node, block: Block, position) -> Operation | None:
    """The op outside the pair through which `b` depends on `a` (a reader of `a`'s), if any."""
    stack = [(r, r) for v in a.results for r in readers(v, block) if r is not b]
    seen: set[Operation] = set()
    while stack:
        op, first = stack.pop()
        if op is b:
            return first
        if op in seen or op not in position or position[op] > position[b]:
            continue
        seen.add(op)
        stack += [(r, first) for v in op.results for r in readers(v, block)]
    return None


def shared_loops(a: Node, b: Node) -> Join | Refusal:
    """How `a` and `b` share a loop nest, or the rule that keeps them apart. Where their loops
    as they are share none, or share one that misplaces a read ("iteration", "index"), one node's
    loops may be permuted (see analysis/loop_order.py): the legal permutation whose accesses are
    most often contiguous along the innermost loop is taken."""
    if a.device != b.device:
        return Refusal("device", (a.device, b.device))
    found = _joined(a, b, None)
    if isinstance(found, Refusal) and found.rule in ("iteration", "index"):
        legal = [j for r in reorders(a, b) if isinstance(j := _joined(a, b, r), Join)]
        return max(legal, key=lambda j: contiguous_bytes(a, b, j), default=found)
    return found


def _joined(a: Node, b: Node, reorder: Reorder | None) -> Join | Refusal:
    """The loop nest `a` and `b` share with `reorder` applied, if every read of `a`'s results
    in `b` is where `a` stored it; or the rule that refuses it."""
    templates = [k for k, node in enumerate((a, b)) if node.template is not None]
    shared = None
    if reorder is None and len(templates) == 1:  # over the template's loops as they are
        shared = keeping(a.sizes, b.sizes, templates[0])
    shared = shared or join(a.sizes, b.sizes, reorder)
    if shared is None:
        return Refusal("iteration", (a.sizes, b.sizes))
    if not template_fusable(a, b, shared.sizes):
        template, other = (a, b) if a.template is not None else (b, a)
        return Refusal("template", (template.symbol, other.symbol))
    stored = {s.buffer: onto(s.index, shared, 0) for s in a.body.ops if isinstance(s, Store)}
    for load in b.body.ops:
        if not isinstance(load, Load) or load.source not in a.results:
            continue
        if load.mask is not None or load.indirect is not None:
            return Refusal("indirect-read", (b.symbol, load.source.name))
        index = onto(load.index, shared, 1)
        if not equal(index, stored[load.source]):
            found = (b.symbol, load.source.name, index, a.symbol, stored[load.source])
            return Refusal("index", found)
    return shared


def kept_whole(a: Node, b: Node, shared: Join, sm_count: int) -> Refusal | None:
    """The "split" rule: `a` reduces rows too few to fill the GPU, which split-reductions
    (after fuse) splits into parts, and `b` reads a per-row result of it to store along the rows
    (a batch norm's normalized output). Fused, the kernel would need every row whole after its
    reduction, so it could not split: a few programs would walk all the rows (64 channels of
    400k elements: 2 programs). Inductor splits such reductions before fusing, so it never
    fuses them either. The row count decides (`wanted_parts` for `sm_count` SMs), not the
    reductions' kinds: a two-pass variance splits once welford merged it."""
    if wanted_parts(a, sm_count) <= 1:  # first: cheaper than the indices
        return None
    xs, rs = shared.sizes
    r_vars = {pvar(k) for k in range(len(xs), len(xs) + len(rs))}

    def along_r(index: IntLike, part: int) -> bool:
        return bool(getattr(onto(index, shared, part), "free_symbols", set()) & r_vars)

    per_row = {s.buffer for s in a.body.ops if isinstance(s, Store) and not along_r(s.index, 0)}
    reads_row = any(isinstance(op, Load) and op.source in per_row for op in b.body.ops)
    if not reads_row or not any(isinstance(s, Store) and along_r(s.index, 1) for s in b.body.ops):
        return None
    x, r = (product(s) for s in a.sizes)
    return Refusal("split", (a.symbol, x, r, b.symbol))


def onto(index: IntLike, shared: Join, part: int) -> IntLike:
    """An index of the join's first (`part` 0) or second node over the shared loops, with what
    their ranges make trivial folded (a loop cut in pieces leaves `Mod`s of them behind)."""
    xs, rs = shared.sizes
    ranges = {pvar(k): s for k, s in enumerate([*xs, *rs])}
    return simplify_with_ranges(substitute(index, (shared.first, shared.second)[part]), ranges)


def legal_fusion(
    a: Node, b: Node, block: Block, position, max_parts: int, sm_count: int = SM_COUNT
) -> Join | Refusal:
    """How `a` (earlier) and `b` fuse, or the first rule that refuses them."""
    parts = a.symbol.count("_") + b.symbol.count("_") + 2
    if parts > max_parts:
        return Refusal("max-fusion-size", (parts, max_parts))
    inplace = a if a.updates is not None else b if b.updates is not None else None
    if inplace is not None:
        return Refusal("in-place", (inplace.symbol, inplace.updates.name))
    through = creates_cycle(a, b, block, position)
    if through is not None:
        return Refusal("cycle", (b.symbol, a.symbol, _name(through)))
    shared = shared_loops(a, b)
    if isinstance(shared, Refusal):
        return shared
    return read_first(a, b, shared, block, position) or kept_whole(a, b, shared, sm_count) or shared


def read_first(a: Node, b: Node, shared: Join, block: Block, position) -> Refusal | None:
    """The "overwrite" rule: a node that overwrites a graph input (AOTAutograd's input
    mutations) runs after every other read of it, and the fused node takes `a`'s place. So it
    fuses as `b` with no `a` that a reader of the input follows, and with an `a` that reads
    the input only where each lane reads it before storing it: at the element it overwrites,
    in a pointwise kernel (its body runs in order; a reduction's phases need not)."""
    for k, (writer, other) in enumerate(((a, b), (b, a))):
        for target in overwritten_inputs(writer):
            store = next(s for s in writer.body.ops if isinstance(s, Store) and s.buffer is target)
            at = onto(store.index, shared, k)
            loads = [op for op in other.body.ops if isinstance(op, Load) and op.source is target]
            lane = writer is b and not shared.sizes[1]
            if loads and not (lane and all(_plain_at(op, shared, 1 - k, at) for op in loads)):
                return Refusal("overwrite", (writer.symbol, target.name, f"@{other.symbol}"))
            for reader in memory_readers(target, block, lambda op: isinstance(op, Reinterpret)):
                if writer is b and position[a] < position.get(reader, -1) < position[b]:
                    return Refusal("overwrite", (writer.symbol, target.name, _name(reader)))
    return None


def _plain_at(load: Load, shared: Join, part: int, index: IntLike) -> bool:
    """Whether `load` of part `part` reads at `index` of the shared loops, unmasked, directly."""
    plain = load.mask is None and load.indirect is None
    return plain and equal(onto(load.index, shared, part), index)


def _name(op: Operation) -> str:
    """`@op3`, or `all_reduce %buf1` for an op without a symbol."""
    if op.symbol:
        return f"@{op.symbol}"
    return f"{op.kind} %{op.results[0].name}" if op.results else op.name


class Remarks:
    """fuse's decisions as remarks at the later node of each pair: to the diagnostic handlers in
    scope (mind-opt --remarks) and to the fusion log. Each refused pair is reported once."""

    def __init__(self, graph: str):
        self.graph = graph
        self.reported: set[tuple[str, str]] = set()

    @staticmethod
    def wanted() -> bool:
        return handled() or log.isEnabledFor(logging.INFO)

    def refused(self, a: Node, b: Node, score: int, refusal: Refusal) -> None:
        if (a.symbol, b.symbol) not in self.reported:
            self.reported.add((a.symbol, b.symbol))
            message = f"@{a.symbol} + @{b.symbol}: not fused {refusal}; would save {score} bytes"
            self._emit(message, b, logging.DEBUG)

    def fused(self, a: Node, b: Node, score: int, node: Node, shared: Join) -> None:
        r, how = shared.reorder, ""
        if r is not None:
            node_ = (a, b)[r.node]
            how = f", loops of @{node_.symbol} {r.describe(node_.sizes)}"
        message = f"@{a.symbol} + @{b.symbol}: fused into @{node.symbol}{how}, saving {score} bytes"
        self._emit(message, b, logging.INFO)

    def _emit(self, message: str, at: Node, level: int) -> None:
        diagnostic = Diagnostic(message, at.loc, "remark")
        emit(diagnostic)
        log.log(level, "@%s: %s", self.graph, diagnostic.head())


def fuse_pair(a: Node, b: Node, shared: Join, block: Block, keep_rounding: bool = False) -> Node:
    """One node running `a`'s body then `b`'s over the shared loops, in place of both: a load
    in `b` of what `a` stores becomes the stored value, and a store nobody else reads goes.
    Where it goes, `b` casting the value back to f32 takes what the store rounded to bf16 or
    f16 (`_unrounded`), unless `keep_rounding`."""
    forwarded = {load.source for load in b.body.ops if isinstance(load, Load)} & set(a.results)
    dropped = {v for v in forwarded if readers(v, block) <= {a, b}}
    stores = [s for part in (a, b) for s in part.body.ops if isinstance(s, Store)]
    own = {*a.results, *b.results}  # (not the graph inputs they overwrite)
    kept = [s.buffer for s in stores if s.buffer in own and s.buffer not in dropped]
    node = Node.build(
        "scheduled.node",
        sizes=shared.sizes,
        device=a.device,
        origins=sorted({*(a.origins or []), *(b.origins or [])}),
        template=a.template or b.template,
        results=[v.type for v in kept],
        names=[v.name for v in kept],
        regions=[Region()],
        symbol=f"{a.symbol}_{b.symbol}",
        loc=a.loc,
    )
    body_map: dict[Value, Value] = dict(zip(kept, node.results))
    stored: dict[Value, Value] = {}
    #: the value a dropped store rounded -> the value before the rounding
    unrounded: dict[Value, Value] = {}
    ops: list[Operation] = []
    for k, part in enumerate((a, b)):
        for op in part.body.ops:
            if part is b and isinstance(op, Load) and op.source in forwarded:
                body_map[op.result] = stored[op.source]
            elif part is b and (wide := _unrounded(op, body_map, unrounded)) is not None:
                body_map[op.result] = wide
            elif isinstance(op, Store) and op.buffer in dropped:
                stored[op.buffer] = value = body_map[op.value]
                if not keep_rounding and rounds(value) and not converts(value):
                    unrounded[value] = value.owner.x
            else:
                ops.append(copy_body_op(op, body_map, lambda e, k=k: onto(e, shared, k)))
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


def _unrounded(op: Operation, body_map: dict, unrounded: dict) -> Value | None:
    """What `op` stands for where it casts back the rounded value of a store that fusion
    dropped: the value before the rounding, the store's own buffer being
    gone; a comparison still takes the rounded one (analysis/rounding.py)."""
    if not isinstance(op, Cast) or compared(op.result):
        return None
    wide = unrounded.get(body_map.get(op.x))
    return wide if wide is not None and wide.type.dtype == op.result.type.dtype else None


def toposort(
    block: Block, start: int, stop: int, read_sets: dict[Operation, set[Value]] | None = None
) -> None:
    """Reorder `block.ops[start:stop]` so every value is defined before use, keeping the order
    otherwise (each time, the first op whose inputs are ready), when the ops outside the range
    are in order and read nothing it defines out of order. After a fusion the range from the
    fused node to where its later part was is all that can be out of order. `read_sets`: what
    ops read, where known (`reads` is computed for the others)."""
    window = block.ops[start:stop]
    index = {op: i for i, op in enumerate(window)}
    waiting = [0] * len(window)
    users: list[list[int]] = [[] for _ in window]
    known = read_sets or {}
    for i, op in enumerate(window):
        read = known.get(op)
        for j in {
            index[v.owner] for v in (reads(op) if read is None else read) if v.owner in index
        }:
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
    """The greedy order (best score, then the closest, then the earliest) without weighing every
    pair after each fusion. Only nodes that share a buffer can save traffic, so the candidates
    are those pairs, in a heap by score. A pair's score does not change while both nodes live
    (another fusion renames the buffers they share, not their sizes, and leaves who else reads
    them), and a pair that may not fuse never may again (a path through a third node only grows;
    the other rules look at the two nodes alone): so the top-score pairs are taken out, ordered
    by their distance now, weighed in turn, and the rest put back. `remarks` hears of each pair
    weighed and refused."""

    def __init__(
        self,
        graph: Operation,
        max_parts: int,
        remarks: Remarks | None = None,
        sm_count: int = SM_COUNT,
        keep_rounding: bool = False,
    ):
        self.block = graph.body
        self.max_parts, self.sm_count = max_parts, sm_count
        self.keep_rounding = keep_rounding
        self.remarks = remarks
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
        self.pair(node, self.refresh(node))

    def refresh(self, node: Node) -> set[Operation]:
        """Record what `node` and the candidates sharing a buffer with it read (those reading
        a fused node read its new results); those candidates."""
        partners = {
            op
            for v in {*reads(node), *node.results}
            for op in (*readers(v, self.block), v.owner)
            if op in self.read_sets
        }
        for op in (node, *partners):
            self.read_sets[op] = set(reads(op))
        return partners

    def pair(self, node: Node, partners: set[Operation]) -> None:
        for other in partners:
            a, b = sorted((other, node), key=self.position.__getitem__)
            gain = score(a, b, self.block, self.read_sets)
            if gain > 0:
                heapq.heappush(self.heap, (-gain, next(self.count), a, b))

    def best(self) -> tuple[Node, Node, Join, int] | None:
        """The legal pair with the highest score (ties: the closest, then the earliest), and its
        score."""
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
                found = legal_fusion(a, b, self.block, self.position, self.max_parts, self.sm_count)
                if isinstance(found, Join):
                    for entry in tied[k + 1 :]:
                        heapq.heappush(self.heap, entry)
                    return a, b, found, -top
                if self.remarks is not None:
                    self.remarks.refused(a, b, -top, found)
        return None

    def closest_first(self, entry: tuple[int, int, Node, Node]) -> tuple[int, int]:
        first, second = sorted((self.position[entry[2]], self.position[entry[3]]))
        return second - first, first

    def fuse(self, a: Node, b: Node, shared: Join) -> Node:
        start, stop = self.position[a], self.position[b]
        node = fuse_pair(a, b, shared, self.block, self.keep_rounding)
        for gone in (a, b):
            del self.read_sets[gone], self.position[gone]
        partners = self.refresh(node)
        toposort(self.block, start, stop, self.read_sets)
        self.renumber(start)
        self.pair(node, partners)
        return node


def best_fusion(
    graph: Operation, max_parts: int, remarks: Remarks | None = None
) -> tuple[Node, Node, Join, int] | None:
    """The legal pair with the highest score (ties: the closest, then the earliest), and its
    score. Pairs that share no buffer are not weighed; `remarks` hears of each refusal."""
    return FusionSearch(graph, max_parts, remarks).best()


def fuse_graph(
    graph: Operation, max_parts: int = 64, sm_count: int = SM_COUNT, keep_rounding: bool = False
) -> None:
    remarks = Remarks(graph.symbol) if Remarks.wanted() else None
    search = FusionSearch(graph, max_parts, remarks, sm_count, keep_rounding)
    while (found := search.best()) is not None:
        a, b, shared, saved = found
        node = search.fuse(a, b, shared)
        if remarks is not None:
            remarks.fused(a, b, saved, node, shared)


@dataclass(frozen=True)
class Fuse(GraphPass, name="fuse", input="scheduled"):
    """Fuse scheduler nodes with compatible loops, most bytes saved first.

    `max-fusion-size` caps the nodes in one kernel (Inductor's config.max_fusion_size);
    `sm-count` is the GPU's, as split-reductions': a reduction with too few rows to fill it
    splits."""

    max_fusion_size: int = option(64, "the most nodes one fused kernel may hold")
    sm_count: int = option(
        SM_COUNT,
        "the GPU's SMs (split-reductions'): rows too few to fill them split, and stay apart",
    )
    emulate_precision_casts: bool = option(
        False, "keep the rounding of a removed buffer's bf16/f16 store (eager's, op by op)"
    )

    def run_graph(self, graph: Operation) -> None:
        fuse_graph(graph, self.max_fusion_size, self.sm_count, self.emulate_precision_casts)
