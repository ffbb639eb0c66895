"""Autotuning's candidates (`to-triton{autotune=true}`, mode="max-autotune"): a plan of one kernel
lists, on its launch, other ways to run it, which the runtime benchmarks at load and caches
(runtime/autotune.py): the other configs its strategy proposes, and for a reduction the other
ways to compute it, with their configs too: a looped kernel for a persistent one, a persistent
one for a looped row of at most PERSISTENT_TUNE_MAX elements, a cooperative one for a looped row
of at least TUNE_MIN_ROW_BYTES read in several phases, and a looped one for a cooperative row. A
cooperative candidate takes three more arguments, which its launcher passes
(runtime/cooperative.py), so the launch's own arguments are the same for all. A config that
changes the kernel's source (its masks, index width or groups: a block that divides a size needs
no mask where a larger one does) gets a kernel of its own, compiled and timed like the others.
Symbolic sizes are not tuned: candidates launch over fixed grids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mind.dialects.scheduled import Node
from mind.ir.core import Value

from .cooperative import TUNE_MIN_ROW_BYTES, Cooperative
from .heuristics import LaunchConfig
from .looped import Looped
from .persistent import Persistent
from .plan import KernelPlan, Options, Strategy
from .scans import holds_row
from .tiling import Tiling, row_size

#: the longest row that a looped reduction also tries in registers (Inductor's largest
#: persistent block)
PERSISTENT_TUNE_MAX = 4096


def with_candidates(
    plan: KernelPlan,
    node: Node,
    strategy: Strategy,
    options: Options,
    buffers: Mapping[Value, Value],
    index: int,
) -> KernelPlan:
    """`plan` with its launch's candidates, and the kernels they add: per strategy (the plan's,
    then its alternatives), a kernel for each source its configs need, the first named as the
    strategy names it and the others `_v1`, `_v2`, ..."""
    static = all(isinstance(s, int) for sizes in node.sizes for s in sizes)
    if len(plan.launches) != 1 or len(plan.kernels) != 1 or not static:
        return plan
    (launch,), kernels = plan.launches, list(plan.kernels)
    candidates = []
    for other in [strategy, *_alternatives(strategy, node, options)]:
        for k, tilings in enumerate(_by_source(other, node, options)):
            if other is strategy and k == 0:  # the plan's own kernel; its config is the launch's
                kernel, tilings = kernels[0], tilings[1:]
            else:
                suffix = f"_v{k}" if k else ""
                variant = other.plan(node, options, buffers, index, tilings[0], suffix)
                if len(variant.kernels) != 1 or variant.launches[0].args != launch.args:
                    continue
                kernel = variant.kernels[0]
                kernels.append(kernel)
            candidates += [(kernel.symbol, describe(t.config), other.grid(t)) for t in tilings]
    launch = dataclasses.replace(launch, candidates=tuple(candidates))
    return KernelPlan(kernels, [launch])


def describe(config: LaunchConfig) -> dict[str, int]:
    """A candidate's config as a launch lists it: constexprs, then warps and stages."""
    return {**config.blocks, "num_warps": config.num_warps, "num_stages": config.num_stages}


def _by_source(strategy: Strategy, node: Node, options: Options) -> list[list[Tiling]]:
    """The strategy's tilings of `node` (its own first, then its candidates, each config once),
    grouped by the kernel source they need (`_shape`), in order of first appearance."""
    base = strategy.tiling(node, options)
    groups: dict[tuple, list[Tiling]] = {}
    seen = set()
    for tiling in [base, *strategy.candidates(node, options, base)]:
        config = describe(tiling.config)
        key = tuple(config.items())
        if key not in seen:
            seen.add(key)
            groups.setdefault(_shape(tiling), []).append(tiling)
    return list(groups.values())


def _shape(tiling: Tiling) -> tuple:
    """What of a tiling shows in the kernel's source (block sizes are constexprs)."""
    groups = [(g.prefix, g.dims, g.axis, g.masked) for g in tiling.groups]
    return (tuple(groups), tiling.index_dtype, tuple(tiling.config.blocks))


def _alternatives(strategy: Strategy, node: Node, options: Options) -> list[Strategy]:
    """The other strategies that compute the node with one kernel of the same arguments."""
    if isinstance(strategy, Persistent):
        return [] if holds_row(node) else [Looped()]
    if isinstance(strategy, Cooperative):
        return [Looped()]
    if not isinstance(strategy, Looped):
        return []
    others: list[Strategy] = [Persistent()] if row_size(node) <= PERSISTENT_TUNE_MAX else []
    cooperative = Cooperative()
    return others + ([cooperative] if cooperative.fits(node, options, TUNE_MIN_ROW_BYTES) else [])
