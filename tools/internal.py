"""Internal errors: an exception that is not a MindError is a bug in mind, not in the input. The
tools print it as one diagnostic naming the step (the pass) and the input, and exit 1, instead of
a traceback; `MIND_TRACEBACK=1` adds the traceback for whoever debugs mind."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mind.ir.diagnostics import Diagnostic
    from mind.passes.manager import PassManager


@dataclass
class Progress:
    """What a tool is doing now: a step, or the pass its manager is running."""

    step: str = "reading the input"
    manager: PassManager | None = None

    def where(self) -> str:
        running = self.manager.current if self.manager is not None else None
        return f"pass '{running}'" if running is not None else self.step


def internal_error(tool: str, exc: BaseException, where: str, filename: str) -> Diagnostic:
    """One error naming the input, the step and the innermost frame (and, with
    `MIND_TRACEBACK=1`, the traceback)."""
    from mind.ir.diagnostics import Diagnostic

    frames = traceback.extract_tb(exc.__traceback__)
    at = f" [{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}]" if frames else ""
    text = f"{filename}: internal error in {where}: {type(exc).__name__}: {exc}{at}"
    text += f"\n({tool} failed on this input: a bug in mind, please report it with the input)"
    if os.environ.get("MIND_TRACEBACK"):
        text += "\n" + "".join(traceback.format_exception(exc))
    return Diagnostic(text)
