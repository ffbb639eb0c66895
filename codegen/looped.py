"""The looped-reduction strategy: a row too long for registers is reduced block by block, in an
r-loop per phase that reads along r (see analysis/phases.py): accumulators are carried through
the loop and reduced across the block after it, and the loop recomputes the loads it needs
(softmax without the online_softmax rewrite: max, then sum of exp, then the normalized store).

Rows read again by a later loop stay in L2 (`evict_last`); the last loop streams through
(`evict_first`). A later loop walks its blocks last to first, so that it starts on the blocks the
loop before read last, the likeliest to be in L2 still (on an H200, a softmax of 1024 rows of
65536 f32 took 186-192 µs this way against 191-197 µs forward). A loop that carries a scan walks
forward, the way the scan runs. A symbolic r size runs the loop up to the r0_numel argument.
"""

from __future__ import annotations

import sympy
from mind.analysis.coalescing import is_inner
from mind.dialects.scheduled import Node, Reduction, Scan
from mind.dialects.triton import For, Yield, block_dim
from mind.ir.core import Block, Region, Value
from mind.ir.symbols import size_hint, sym
from mind.ir.types import ScalarType

from .accumulators import accumulator
from .heuristics import looped_candidates, looped_config, outer_r_block
from .kernel import KernelBuilder, Scope
from .plan import Options, Strategy
from .scans import Carry, carry_init, holds_row
from .tiling import Tiling, reduction_tiling, row_itemsize, row_load_words


class Looped(Strategy):
    name, prefix = "reduction", "red"

    def applies(self, node: Node, options: Options) -> bool:
        return bool(node.sizes[1]) and not holds_row(node)

    def tiling(self, node: Node, options: Options) -> Tiling:
        itemsize = row_itemsize(node)
        rows = outer_r_block(row_load_words(node), options.outer_load_words)
        return reduction_tiling(
            node,
            lambda x, r, inner: looped_config(
                x, r, inner, options.max_r_block, options.max_warps, itemsize, rows
            ),
        )

    def candidates(self, node: Node, options: Options, tiling: Tiling) -> list[Tiling]:
        x, r = (size_hint(g.numel) for g in tiling.groups)
        configs = looped_candidates(x, r, is_inner(node))
        return [reduction_tiling(node, lambda *_, c=c: c) for c in configs]

    def body(self, b: KernelBuilder, top: Scope) -> None:
        rbase = b.base(top, b.tiling.rgroup)
        phases = b.phases
        looped = [k for k in range(phases.count) if any(phases.r_work(k))]
        for k in range(phases.count):
            for op in phases.x_ops(k):
                b.translate(top, op)
            reductions, stores = phases.r_work(k)
            if not reductions and not stores:
                continue
            last = k == looped[-1]
            b.eviction = None if len(looped) == 1 else ("evict_first" if last else "evict_last")
            r_loop(b, top, rbase, reductions, stores, backward=k != looped[0])
            b.eviction = None


def r_loop(
    b: KernelBuilder,
    top: Scope,
    rbase: Value,
    reductions: list[Reduction],
    stores,
    backward: bool = False,
):
    """One r-loop: the reductions' accumulators carried along r, then reduced across the block;
    the scans' running values carried too (codegen/scans.py). `backward`: its blocks last to
    first, unless it carries a scan."""
    ops = [
        op
        for op in b.phases.closure(reductions + stores)
        if not isinstance(op, Reduction) and not (op.results and op.results[0] in top.values)
    ]
    carried_by = [(op, accumulator(op).init(b, top, op)) for op in reductions]
    scans = [(op, carry_init(b, top, op)) for op in ops if isinstance(op, Scan)]
    inits = [v for _, vs in carried_by + scans for v in vs]
    block = Block([Value("r0_offset", ScalarType(b.tiling.index_dtype))])
    carried = [block.add_arg(Value(f"_acc{i}", v.type)) for i, v in enumerate(inits)]
    # a static trip count as Inductor writes it; a symbolic one runs to the r0_numel argument
    rnumel = b.tiling.rgroup.numel
    stop = rnumel if isinstance(rnumel, int) else b.numels["r0_"]
    loop = For.build(
        "triton.for",
        range=(0, stop, block_dim("R0_BLOCK")),
        init=inits,
        results=[v.type for v in inits],
        names=[f"tmp{b.counter + i}" for i in range(len(inits))],
        regions=[Region(block)],
    )
    b.counter += len(inits)
    inner = top.child(block)
    offset = block.args[0]
    if backward and not scans:
        offset = _backward(b, inner, offset, stop)
    b.group_index(inner, b.tiling.rgroup, offset, rbase)
    start = sum(len(vs) for _, vs in carried_by)
    for op, vs in scans:
        inner.carries[op] = Carry(carried[start : start + len(vs)])
        start += len(vs)
    for op in ops:
        b.translate(inner, op)
    mask, nexts, start = b.mask(inner, b.tiling.groups), [], 0
    for op, vs in carried_by:
        nexts += accumulator(op).step(b, inner, op, carried[start : start + len(vs)], mask)
        start += len(vs)
    for op, _ in scans:  # (a scan computed as its twin's carries its start unchanged)
        carry = inner.carries[op]
        nexts += carry.nexts or carry.args
    block.append(Yield.build("triton.yield", values=nexts))
    top.block.append(loop)
    start = 0
    for op, vs in carried_by:
        out = loop.results[start : start + len(vs)]
        top.values.update(zip(op.results, accumulator(op).finish(b, top, op, out)))
        start += len(vs)


def _backward(b: KernelBuilder, scope: Scope, offset: Value, stop: int | Value) -> Value:
    """The start of the block an r-loop counting `offset` up to `stop` reads backward: the last
    block's start, less `offset`."""
    block, values = block_dim("R0_BLOCK"), [offset] + ([stop] if isinstance(stop, Value) else [])
    size = sym(stop.name) if isinstance(stop, Value) else stop
    last = block * sympy.floor((size - 1) / block)
    return b.bind(scope, last - sym(offset.name), values, (), "r0_start")
