"""Autotuning's candidates (`to-triton{autotune=true}`, mode="max-autotune"): a plan of one
kernel lists, on its launch, other ways to run it, which the runtime benchmarks at load and
caches (runtime/autotune.py): its kernel with the other configs its strategy proposes that keep
the kernel's source (the same groups, masks and index width), and for a reduction the other way
to compute it, with its configs too: a looped kernel for a persistent one, and a persistent one
for a looped row of at most PERSISTENT_TUNE_MAX elements. Symbolic sizes are not tuned:
candidates launch over fixed grids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mind.dialects.scheduled import Node
from mind.ir.core import Value

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
    """`plan` with its launch's candidates, and the kernels they add."""
    static = all(isinstance(s, int) for sizes in node.sizes for s in sizes)
    if len(plan.launches) != 1 or len(plan.kernels) != 1 or not static:
        return plan
    (launch,), kernels = plan.launches, list(plan.kernels)
    candidates = _configs(strategy, node, options, kernels[0].symbol)
    for other in _alternatives(strategy, node):
        alternative = other.plan(node, options, buffers, index)  # named by its own prefix
        if len(alternative.kernels) != 1:
            continue
        kernel, (alt_launch,) = alternative.kernels[0], alternative.launches
        config = describe(other.tiling(node, options).config)
        kernels.append(kernel)
        candidates += [(kernel.symbol, config, alt_launch.grid)]
        candidates += _configs(other, node, options, kernel.symbol)
    launch = dataclasses.replace(launch, candidates=tuple(candidates))
    return KernelPlan(kernels, [launch])


def describe(config: LaunchConfig) -> dict[str, int]:
    """A candidate's config as a launch lists it: constexprs, then warps and stages."""
    return {**config.blocks, "num_warps": config.num_warps, "num_stages": config.num_stages}


def _configs(strategy: Strategy, node: Node, options: Options, kernel: str) -> list[tuple]:
    """The strategy's other configs for its kernel of `node` that keep the kernel's source."""
    base = strategy.tiling(node, options)
    seen = [base.config]
    found = []
    for tiling in strategy.candidates(node, options, base):
        if tiling.config in seen or _shape(tiling) != _shape(base):
            continue
        seen.append(tiling.config)
        found.append((kernel, describe(tiling.config), strategy.grid(tiling)))
    return found


def _shape(tiling: Tiling) -> tuple:
    """What of a tiling shows in the kernel's source (block sizes are constexprs)."""
    groups = [(g.prefix, g.dims, g.axis, g.masked) for g in tiling.groups]
    return (tuple(groups), tiling.index_dtype, tuple(tiling.config.blocks))


def _alternatives(strategy: Strategy, node: Node) -> list[Strategy]:
    """The other strategies that compute the node with one kernel of the same arguments."""
    if isinstance(strategy, Persistent):
        return [] if holds_row(node) else [Looped()]
    if isinstance(strategy, Looped) and row_size(node) <= PERSISTENT_TUNE_MAX:
        return [Persistent()]
    return []
