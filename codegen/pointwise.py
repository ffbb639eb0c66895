"""The pointwise strategy: a node without reductions, one element per lane (1-D, or a 2-D tile
for transposed accesses, see tiling.py)."""

from __future__ import annotations

from mind.dialects.scheduled import Node
from mind.ir.symbols import size_hint

from .heuristics import pointwise_candidates
from .kernel import KernelBuilder, Scope
from .plan import Options, Strategy
from .tiling import Tiling, pointwise_tiling


class Pointwise(Strategy):
    name, prefix = "pointwise", "poi"

    def applies(self, node: Node, options: Options) -> bool:
        return not node.sizes[1]

    def tiling(self, node: Node, options: Options) -> Tiling:
        return pointwise_tiling(node)

    def candidates(self, node: Node, options: Options, tiling: Tiling) -> list[Tiling]:
        numels = {g.prefix: size_hint(g.numel) for g in tiling.groups}
        configs = pointwise_candidates(numels["x"], numels.get("y"))
        return [pointwise_tiling(node, config) for config in configs]

    def body(self, b: KernelBuilder, top: Scope) -> None:
        for k in range(b.phases.count):
            for op in b.phases.x_ops(k):
                b.translate(top, op)
