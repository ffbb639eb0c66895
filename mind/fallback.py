"""The exceptions the backend lets through instead of falling back to eager: Dynamo's own
control flow (restart the analysis with other settings, skip the frame). Inductor lets them
through too; caught, they would leave the graph eager for good (a Python float argument that
Dynamo wants to turn into a tensor input, under `dynamic=True` or on a second call)."""

from __future__ import annotations

import torch._dynamo.exc

#: base classes, by name, found by feature test: both torch 2.11 and 2.14 have them
_CONTROL_FLOW_NAMES = ("RestartAnalysis", "SkipFrame")
DYNAMO_CONTROL_FLOW: tuple[type[BaseException], ...] = tuple(
    getattr(torch._dynamo.exc, n) for n in _CONTROL_FLOW_NAMES if hasattr(torch._dynamo.exc, n)
)
