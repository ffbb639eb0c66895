"""The cooperative-reduction strategy: a row too long for one program's registers, which a
looped kernel would read from memory once per phase (a softmax: its max and sum, then the
normalized store), is split between `splits` programs, each holding its chunk of R0_BLOCK
elements in registers for every phase. So the row is read once.

At each phase's reductions, each program reduces its chunk to partials (the accumulator's
`partial`), stores them in a workspace, waits at a barrier for the other programs of its group
(`triton.barrier`), loads all the group's partials, laid along r, and merges them as a looped
kernel merges its lanes (`finish`): every program then holds the row's result.

Grid: axis 0 the chunk, axis 1 the group; a group takes every `xgroups`-th row, from its own,
and its programs walk them together. The launcher (runtime/cooperative.py) sizes the groups so
that every program is resident at once (a barrier waits for programs that must be running),
and passes the workspace, the semaphores and the group count. A group's partials of one row
sit apart from those of the next (`xslot`, by the row's parity), so a program a row ahead never
overwrites what a slower one still reads; each phase has slots of its own.

On an H100, a softmax of 1024 rows of 65536 f32 took 221 us this way (82% of copy bandwidth)
against 270 us looped (68%; Inductor's 272 us). Its normalization rescales each chunk's exp,
held in registers, rather than taking the exp of the row's values again (`Partial.reuse`,
codegen/online_softmax.py): 215 against 226 us in one process. Loading the group's next row
before its barrier was slower (255 us), and after it (220 us) gained nothing on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from mind.analysis.coalescing import is_inner
from mind.analysis.phases import Phases
from mind.dialects.scheduled import Node, Reduction
from mind.dialects.triton import (
    COOPERATIVE_ARGS,
    Barrier,
    For,
    Yield,
    dtype_of,
    ptr_type,
    shape_of,
)
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.symbols import Mod, sym
from mind.ir.types import ScalarType

from .accumulators import accumulator
from .heuristics import LaunchConfig, cdiv, next_power_of_2
from .kernel import KernelBuilder, Scope
from .plan import Options, Strategy
from .scans import holds_row
from .tiling import Group, Tiling, index_dtype, numel, row_itemsize

#: a program's chunk of the row: this many bytes of its elements, and a warp per
#: ELEMENTS_PER_WARP of them. On an H100 (softmax, rows of 16384 to 131072): f32 chunks of 4096
#: with 4 warps ran at 75-85% of copy bandwidth, chunks of 8192 with 4 or 8 warps 2-5% slower,
#: 16 warps or chunks of 16384 10-50% slower (fewer programs resident); bf16 chunks of 8192 with
#: 8 warps within 6% of the best config at every width
CHUNK_BYTES, ELEMENTS_PER_WARP = 16 * 1024, 1024
#: rows of fewer bytes stay looped: their second read comes from L2 often enough (f32 softmax
#: rows of 16384 ran at 85% of copy bandwidth cooperative and 86% looped; of 32768, 84% against
#: 73%; bf16 rows of 32768 alike, of 65536 60% against 57%)
MIN_ROW_BYTES = 128 * 1024
#: under autotuning, rows from this many bytes are also timed cooperative (a looped kernel's
#: second read then comes from L2 about as often as not: f32 rows of 16384, 64 KiB, ran as fast
#: either way)
TUNE_MIN_ROW_BYTES = 32 * 1024
#: the most programs a group: all of them must be resident at once, on smaller GPUs too
MAX_SPLITS = 32


class Cooperative(Strategy):
    name, prefix = "cooperative_reduction", "coop"

    def applies(self, node: Node, options: Options) -> bool:
        return self.fits(node, options, MIN_ROW_BYTES)

    def fits(self, node: Node, options: Options, min_row_bytes: int) -> bool:
        """Whether `node` has rows of at least `min_row_bytes`, which its programs can split
        (a cooperating accumulator), read in several phases."""
        if not options.cooperative or not node.sizes[1] or holds_row(node):
            return False
        if node.device is None or node.device.type != "cuda" or not is_inner(node):
            return False
        rows, r = numel(node.sizes[0]), numel(node.sizes[1])
        if not isinstance(rows, int) or not isinstance(r, int) or not rows:
            return False
        if r * row_itemsize(node) < min_row_bytes or cdiv(r, _chunk(node)) > MAX_SPLITS:
            return False
        phases = Phases(node)
        if sum(1 for k in range(phases.count) if any(phases.r_work(k))) < 2:
            return False  # read once anyway
        reductions = [op for op in node.body.ops if isinstance(op, Reduction)]
        return all(accumulator(op).cooperates(op) for op in reductions)

    def tiling(self, node: Node, options: Options) -> Tiling:
        (xs, rs), chunk = node.sizes, _chunk(node)
        xdims, rdims = tuple(range(len(xs))), tuple(range(len(xs), len(xs) + len(rs)))
        config = LaunchConfig({"XBLOCK": 1, "R0_BLOCK": chunk}, chunk // ELEMENTS_PER_WARP)
        ragged = numel(rs) % chunk != 0
        groups = (
            Group("x", "XBLOCK", xdims, tuple(xs), 0, 2, None, False),
            Group("r0_", "R0_BLOCK", rdims, tuple(rs), 1, 2, 0, ragged),
        )
        return Tiling(config, groups, index_dtype(node, numel([*xs, *rs])))

    def grid(self, tiling: Tiling) -> tuple:
        """A program per chunk along axis 0; up to a group per row along axis 1, which the
        launcher caps at the groups resident at once."""
        x, r = tiling.groups
        return (cdiv(r.numel, tiling.config.blocks["R0_BLOCK"]), x.numel, 1)

    def body(self, b: KernelBuilder, top: Scope) -> None:
        x = b.tiling.groups[0]
        types = (ptr_type(dt.f32), ptr_type(dt.i32), ScalarType(dt.i32))
        ws, sem, count = (
            b.kernel.body.add_arg(Value(n, t)) for n, t in zip(COOPERATIVE_ARGS, types)
        )
        idt = b.tiling.index_dtype
        split = top.indices["r0_pid"]
        group = b.emit(top, "program_id", [1], idt, (), result="xgroup")
        block = Block([Value("xoffset", ScalarType(idt))])
        loop = For.build(
            "triton.for",
            range=(group, b.numels["x"], count),
            init=[],
            results=[],
            names=[],
            regions=[Region(block)],
        )
        row = top.child(block)
        b.group_index(row, x, block.args[0], b.base(row, x))
        splits = self.grid(b.tiling)[0]
        exchange = _Exchange(b, row, ws, sem, block.args[0], count, split, group, splits)
        b.eviction = "evict_first"  # each element is read once
        for k in range(b.phases.count):
            _phase(b, row, k, exchange)
        b.eviction = None
        block.append(Yield.build("triton.yield", values=[]))
        top.block.append(loop)
        b.kernel.cooperative = exchange.slots


def _phase(b: KernelBuilder, row: Scope, k: int, exchange: _Exchange) -> None:
    """Phase k of a row, as a persistent kernel runs it, but for its reductions: each reduces
    the program's chunk to partials, which the group's programs exchange."""
    for op in b.phases.x_ops(k):
        b.translate(row, op)
    reductions, stores = b.phases.r_work(k)
    partials = []
    # what an earlier phase computed, or a partial's registers hold, is not computed again
    for op in b.phases.closure(reductions + stores, held=row.values):
        if isinstance(op, Reduction):
            partials.append((op, accumulator(op).partial(b, row, op)))
        else:
            b.translate(row, op)
    if partials:
        exchange(partials)


def _chunk(node: Node) -> int:
    """R0_BLOCK: CHUNK_BYTES of the widest element the row loads."""
    return CHUNK_BYTES // row_itemsize(node)


@dataclass
class _Exchange:
    """A phase's partials through the workspace: stored, a barrier, all loaded and merged. The
    workspace holds, per slot (a partial value of a phase), per row parity, per group, a value per
    program: slot s of this group's row at `2*splits*s*xgroups + xslot`, where
    `xslot = (parity*xgroups + xgroup)*splits`."""

    b: KernelBuilder
    scope: Scope
    ws: Value
    sem: Value
    offset: Value  # xoffset (the row)
    count: Value  # xgroups
    split: Value  # the program's chunk (program id 0)
    group: Value  # xgroup (program id 1)
    splits: int
    #: slots used so far (the kernel's `cooperative`)
    slots: int = 0

    def __post_init__(self) -> None:
        b, scope = self.b, self.scope
        values = [self.offset, self.group, self.count]
        xo, xg, xgs = (sym(v.name) for v in values)
        # xoffset = xgroup + k*xgroups for the group's k-th row, xgroup < xgroups: k is
        # xoffset // xgroups (a non-negative dividend, which Triton divides as floor does)
        parity = Mod(sympy.floor(xo / xgs), 2)
        self.xslot = b.bind(scope, (parity * xgs + xg) * self.splits, values, (), "xslot")
        width = next_power_of_2(self.splits)
        lanes = b.emit(scope, "arange", [0, width], dt.i32, (width,))
        self.lanes = b.emit(scope, "expand_dims", [lanes, 0], dt.i32, (1, width), result="r0_parts")
        self.lanes_mask = None
        if width != self.splits:
            bound = b.full(scope, self.splits, dt.i32, (1, 1))
            self.lanes_mask = b.emit(scope, "lt", [self.lanes, bound], dt.b8, (1, width))

    def __call__(self, partials: list) -> None:
        b, scope = self.b, self.scope
        first = self.slots
        for _, partial in partials:
            for value, _ in partial.values:
                at = self._offset(self.slots, self.split, ())
                at = b.emit(scope, "broadcast_to", [at], dtype_of(at), b.tiling.groups[0].shape)
                scope.block.append(Operation("triton.store", [self.ws, at, value]))
                self.slots += 1
        barrier = Barrier.build(
            "triton.barrier", sem=self.sem, offset=self.group, count=self.splits
        )
        scope.block.append(barrier)
        slot = first
        for op, partial in partials:
            merged = []
            for _, neutral in partial.values:
                merged.append(self._load(slot, neutral))
                slot += 1
            results = accumulator(op).finish(b, scope, op, merged)
            scope.values.update(zip(op.results, results))
            scope.values.update(partial.reuse(results))

    def _load(self, slot: int, neutral: float) -> Value:
        """Slot `slot` of every program of the group, past L1; lanes past the last, `neutral`."""
        at = self._offset(slot, self.lanes, shape_of(self.lanes))
        attrs = {"cache_modifier": ".cg"}
        if self.lanes_mask is not None:
            attrs |= {"mask": self.lanes_mask, "other": neutral}
        return self.b.emit(self.scope, "load", [self.ws, at], dt.f32, shape_of(self.lanes), attrs)

    def _offset(self, slot: int, lane: Value, shape: tuple) -> Value:
        """Slot `slot` of this group's row, at `lane` (the program's chunk, or all of them)."""
        count, xslot, at = (sym(v.name) for v in (self.count, self.xslot, lane))
        expr = 2 * self.splits * slot * count + xslot + at
        names = [v for v in (self.count, self.xslot, lane) if sym(v.name) in expr.free_symbols]
        self.b.counter += 1
        return self.b.bind(self.scope, expr, names, shape, f"ws{self.b.counter - 1}")
