"""The persistent-reduction strategy: a row that fits (at most `persistent-max` elements, or
`OUTER_PERSISTENT_MAX` for a reduction along strided memory; `persistent-max` is by default
by the row's element size, heuristics.PERSISTENT_MAX) is reduced in registers, R0_BLOCK
covering it whole; a row of symbolic length never is (its size hint, each symbol at 8192,
makes `s0//s1` a row of 1). The body's phases (work that depends on k earlier reductions, see
analysis/phases.py) run one after the other; what varies along r is recomputed in each phase
that needs it."""

from __future__ import annotations

from mind.analysis.coalescing import is_inner
from mind.dialects.scheduled import Node, Reduction
from mind.ir.symbols import size_hint

from .accumulators import accumulator
from .heuristics import (
    OUTER_PERSISTENT_MAX,
    persistent_candidates,
    persistent_config,
    persistent_max,
)
from .kernel import KernelBuilder, Scope
from .plan import Options, Strategy
from .scans import holds_row
from .tiling import Tiling, numel, reduction_tiling, row_itemsize, row_size


class Persistent(Strategy):
    name, prefix = "persistent_reduction", "per"

    def applies(self, node: Node, options: Options) -> bool:
        if not node.sizes[1]:
            return False
        if holds_row(node):
            return True
        if not isinstance(numel(node.sizes[1]), int):
            return False  # a symbolic row may outgrow any R0_BLOCK its size hint picks
        size, limit = row_size(node), options.persistent_max or persistent_max(row_itemsize(node))
        if size > limit:
            return False
        return size <= OUTER_PERSISTENT_MAX or is_inner(node)

    def tiling(self, node: Node, options: Options) -> Tiling:
        return reduction_tiling(node, persistent_config)

    def candidates(self, node: Node, options: Options, tiling: Tiling) -> list[Tiling]:
        x, r = (size_hint(g.numel) for g in tiling.groups)
        return [reduction_tiling(node, lambda *_, c=c: c) for c in persistent_candidates(x, r)]

    def body(self, b: KernelBuilder, top: Scope) -> None:
        rgroup = b.tiling.rgroup
        b.group_index(top, rgroup, None, b.base(top, rgroup))
        for k in range(b.phases.count):
            for op in b.phases.x_ops(k):
                b.translate(top, op)
            reductions, stores = b.phases.r_work(k)
            for op in b.phases.closure(reductions + stores):
                if op.results and op.results[0] in top.values:
                    continue
                if isinstance(op, Reduction):
                    top.values.update(zip(op.results, accumulator(op).rows(b, top, op)))
                else:
                    b.translate(top, op)
