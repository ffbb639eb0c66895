"""What code generation makes of one scheduled node: a plan of its kernel and launch, chosen by
a strategy.

A strategy is a class with the kind of node it handles (`applies`), how it tiles the node onto
a kernel's program (`tiling`) and how it arranges the body's reductions and stores (`body`); its
`plan` is one kernel and one launch. A new strategy is a new module in codegen/ and one line in
STRATEGIES (codegen/__init__.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from mind.dialects.scheduled import Node
from mind.ir.core import Operation, Value

from .heuristics import grid
from .kernel import KernelBuilder, Scope
from .tiling import Tiling


class Options(Protocol):
    """The to-triton options strategies read."""

    persistent_max: int
    max_r_block: int
    outer_load_words: int
    max_warps: int
    autotune: bool
    cooperative: bool


@dataclass(frozen=True)
class Launch:
    """`kernel[grid](*args)`: args are wrapper values (buffers, temporaries) and index
    expressions (numels, size symbols). `candidates`, for autotuning, are other ways to run it:
    (kernel, {constexprs..., num_warps, num_stages}, grid)."""

    kernel: str
    args: list
    grid: tuple
    candidates: tuple = ()


@dataclass
class KernelPlan:
    """The kernels a node becomes (its own, and autotuning's alternatives to it) and how the
    wrapper runs them: one launch, none for an empty node."""

    kernels: list[Operation] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)


def python_name(text: str) -> str:
    """`text` with what a Python name cannot hold replaced (origins and graph symbols are any
    string in IR text; kernels and wrappers are Python functions named after them)."""
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def kernel_name(prefix: str, origins: list[str], index: int) -> str:
    """Inductor's kernel names: `triton_per_fused_add_mul_relu_sum_0`."""
    fused = python_name("_".join(sorted(set(origins))))
    return f"triton_{prefix}_fused_{fused}_{index}" if fused else f"triton_{prefix}_fused_{index}"


class Strategy:
    """How one kind of scheduled node becomes kernels."""

    #: the kernels' `kind`, and Inductor's prefix of their names
    name: ClassVar[str]
    prefix: ClassVar[str]

    def applies(self, node: Node, options: Options) -> bool:
        """Whether the strategy plans `node`."""
        raise NotImplementedError

    def tiling(self, node: Node, options: Options) -> Tiling:
        raise NotImplementedError

    def candidates(self, node: Node, options: Options, tiling: Tiling) -> list[Tiling]:
        """Other tilings of the kernel `tiling` gives, for autotuning: other block sizes, warps
        and stages that keep its source (codegen/autotune.py keeps those that do)."""
        return []

    def grid(self, tiling: Tiling) -> tuple:
        """The launch grid: x blocks on axis 0, y blocks on axis 1."""
        return grid(tiling.config, {g.block: g.numel for g in tiling.groups})

    def body(self, b: KernelBuilder, top: Scope) -> None:
        """The kernel's body after the program's index blocks."""
        raise NotImplementedError

    def plan(
        self,
        node: Node,
        options: Options,
        buffers: Mapping[Value, Value],
        index: int,
        tiling: Tiling | None = None,
        suffix: str = "",
    ) -> KernelPlan:
        """One kernel, launched once over the grid its tiling gives (none for an empty node):
        the strategy's tiling, or `tiling` (autotuning's variant, its name ending in `suffix`)."""
        tiling = self.tiling(node, options) if tiling is None else tiling
        if any(g.numel == 0 for g in tiling.groups if g.pid_axis is not None):
            return KernelPlan()  # nothing to compute: the (empty) buffers are all there is
        name = kernel_name(self.prefix, node.origins or [], index) + suffix
        builder = KernelBuilder(node, tiling, self.name, name, buffers)
        kernel = builder.build(self)
        return KernelPlan([kernel], [Launch(name, builder.launch_args, self.grid(tiling))])
