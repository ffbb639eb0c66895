"""Kernel generation for to-triton: each scheduled node becomes a plan (its kernels, their
launches, their temporaries) made by the first strategy in STRATEGIES that applies to it.

    plan.py            KernelPlan, Launch, the Strategy base class
    pointwise.py       no reductions: 1-D or 2-D tiles
    persistent.py      a row in registers
    looped.py          a row in blocks, one r-loop per phase
    kernel.py          the builder they share: signature, index blocks, masks, body ops
    accumulators.py    how each reduction family folds (in registers, through an r-loop)
    online_softmax.py  ... and the online_softmax kind
    tiling.py, heuristics.py, phases.py   block axes and configs; the phases of a body
"""

from mind.dialects.scheduled import Node
from mind.ir.core import Value

from . import online_softmax  # noqa: F401  (adds its accumulator)
from .looped import Looped
from .persistent import Persistent
from .plan import KernelPlan, Launch, Options, Strategy
from .pointwise import Pointwise

#: tried in order: the first strategy that applies to a node plans it
STRATEGIES: list[Strategy] = [Pointwise(), Persistent(), Looped()]


def plan_node(node: Node, options: Options, buffers: dict[Value, Value], index: int) -> KernelPlan:
    """The plan for `node`; its kernels are numbered from `index` (the kernels made so far)."""
    strategy = next(s for s in STRATEGIES if s.applies(node, options))
    return strategy.plan(node, options, buffers, index)


__all__ = ["STRATEGIES", "KernelPlan", "Launch", "Strategy", "plan_node"]
