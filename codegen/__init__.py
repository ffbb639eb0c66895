"""Kernel generation for to-triton: each scheduled node becomes a plan (its kernel and launch)
made by the first strategy in STRATEGIES that applies to it.

    plan.py            KernelPlan, Launch, the Strategy base class
    pointwise.py       no reductions: 1-D or 2-D tiles
    persistent.py      a row in registers
    cooperative.py     a long row in the registers of several programs, which merge partials
    looped.py          a row in blocks, one r-loop per phase
    template.py        a matmul (template = "mm"): tl.dot over tiles, the epilogue fused
    kernel.py          the builder they share: signature, index blocks, masks, body ops
    accumulators.py    how each reduction family folds (in registers, through an r-loop)
    online_softmax.py  ... and the online_softmax kind
    welford.py         ... and the welford kind
    scans.py           scans and sorts along r (in registers, a scan also through an r-loop)
    tiling.py, heuristics.py   block axes and configs (a body's phases: analysis/phases.py)
    autotune.py        the candidates a launch lists under autotuning
    combo.py           a combo's nodes (passes/combo_kernels.py) as one kernel, one launch
"""

from collections.abc import Mapping

from mind.dialects.scheduled import Node
from mind.ir.core import Value

from . import online_softmax, welford  # noqa: F401  (add their accumulators)
from .autotune import with_candidates
from .cooperative import Cooperative
from .looped import Looped
from .persistent import Persistent
from .plan import KernelPlan, Launch, Options, Strategy
from .pointwise import Pointwise
from .template import MatmulTemplate

#: tried in order: the first strategy that applies to a node plans it
STRATEGIES: list[Strategy] = [Pointwise(), MatmulTemplate(), Persistent(), Cooperative(), Looped()]


def plan_node(
    node: Node, options: Options, buffers: Mapping[Value, Value], index: int
) -> KernelPlan:
    """The plan for `node` by the first strategy that applies, with autotuning's candidates when
    asked; its kernels are numbered from `index` (the kernels made so far)."""
    strategy = next(s for s in STRATEGIES if s.applies(node, options))
    plan = strategy.plan(node, options, buffers, index)
    if options.autotune:
        plan = with_candidates(plan, node, strategy, options, buffers, index)
    return plan


__all__ = ["STRATEGIES", "KernelPlan", "Launch", "Strategy", "plan_node"]
