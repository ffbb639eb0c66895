"""Source locations and the diagnostics a user sees: `file:line:col: error: msg`, the line, a
caret. Errors are raised (`MindError`); remarks (what a pass decided, and why) are emitted to the
handlers in scope, as MLIR's diagnostic engine does: `mind-opt --remarks` prints them,
`--verify-diagnostics` checks them against `expected-remark` comments."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in a source text; `source` is the whole text so a caret can be drawn."""

    file: str
    line: int
    col: int
    source: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def source_line(self) -> str | None:
        if self.source is None:
            return None
        lines = self.source.splitlines()
        return lines[self.line - 1] if 0 < self.line <= len(lines) else None


@dataclass
class Diagnostic:
    message: str
    loc: Location | None = None
    severity: str = "error"

    def head(self) -> str:
        """The first line: `file:line:col: severity: message`."""
        return (
            f"{self.loc}: {self.severity}: {self.message}"
            if self.loc
            else self.severity + ": " + self.message
        )

    def render(self) -> str:
        """The head, then the source line and a caret under the column."""
        line = self.loc.source_line() if self.loc else None
        if line is None:
            return self.head()
        return f"{self.head()}\n{line}\n{' ' * (self.loc.col - 1)}^"


Handler = Callable[[Diagnostic], None]
_HANDLERS: ContextVar[tuple[Handler, ...]] = ContextVar("mind_diagnostic_handlers", default=())


@contextmanager
def diagnostic_handler(handler: Handler) -> Iterator[None]:
    """Inside, every emitted diagnostic also goes to `handler` (MLIR's ScopedDiagnosticHandler)."""
    token = _HANDLERS.set((*_HANDLERS.get(), handler))
    try:
        yield
    finally:
        _HANDLERS.reset(token)


def handled() -> bool:
    """Whether any handler listens: a pass builds remarks only then (or when its log is on)."""
    return bool(_HANDLERS.get())


def emit(diagnostic: Diagnostic) -> None:
    for handler in _HANDLERS.get():
        handler(diagnostic)


class MindError(Exception):
    """An error with a location; the tools print `render()` instead of a traceback."""

    def __init__(self, message: str, loc: Location | None = None):
        super().__init__(message)
        self.diagnostic = Diagnostic(message, loc)

    @property
    def loc(self) -> Location | None:
        return self.diagnostic.loc

    def render(self) -> str:
        return self.diagnostic.render()


def user_stacklevel(packages: tuple[str, ...] = ("mind", "torch", "triton")) -> int:
    """The `stacklevel` that makes a warning point at the first caller outside `packages` and
    the standard library: the user's line that compiled or called the code, not mind's."""
    ours = tuple(
        {
            os.path.join(os.path.dirname(module.__file__), "")
            for name, module in list(sys.modules.items())
            if name.split(".")[0] in packages
            and os.path.isabs(getattr(module, "__file__", None) or "")
        }
    )
    stdlib = os.path.join(sysconfig.get_paths()["stdlib"], "")

    def internal(filename: str) -> bool:
        return filename.startswith(ours) or (
            filename.startswith(stdlib) and "site-packages" not in filename[len(stdlib) :]
        )

    frame, level = sys._getframe(1), 1
    while frame is not None and internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level
