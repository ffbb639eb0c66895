"""Running a graph eagerly instead: the warning that says so, and the exceptions the backend lets
through instead of falling back: Dynamo's own control flow (restart the analysis with other
settings, skip the frame). Inductor lets them through too; caught, they would leave the graph
eager for good (a Python float argument that Dynamo wants to turn into a tensor input, under
`dynamic=True` or on a second call)."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import torch._dynamo.exc

from mind.runtime.user_line import warn_at_user

#: base classes, by name, found by feature test: both torch 2.11 and 2.14 have them
_CONTROL_FLOW_NAMES = ("RestartAnalysis", "SkipFrame")
DYNAMO_CONTROL_FLOW: tuple[type[BaseException], ...] = tuple(
    getattr(torch._dynamo.exc, n) for n in _CONTROL_FLOW_NAMES if hasattr(torch._dynamo.exc, n)
)


class MindFallbackWarning(UserWarning):
    """A graph runs eagerly because mind could not compile it."""


def fall_back(graph: str, exc: BaseException, reproducer: Path | None) -> None:
    """Warn once that `graph` runs eagerly, at the user's line that compiled or called it; with
    `MIND_TRACEBACK=1`, the warning ends with the exception's traceback, for whoever debugs mind."""
    where = f"reproducer IR: {reproducer}" if reproducer else "no IR was produced"
    message = f"mind: graph '{graph}' runs eagerly: {type(exc).__name__}: {exc} ({where})"
    if os.environ.get("MIND_TRACEBACK"):
        message += "\n" + "".join(traceback.format_exception(exc)).rstrip()
    warn_at_user(message, MindFallbackWarning)
