"""Source locations and the diagnostics a user sees: `file:line:col: error: msg`, the line, a
caret. Errors are raised (`MindError`); remarks (what a pass decided, and why) are emitted to the
handlers in scope, as MLIR's diagnostic engine does: `mind-opt --remarks` prints them,
`--verify-diagnostics` checks them against `expected-remark` comments."""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import CodeType, FrameType

from .context import bound


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
    with bound(_HANDLERS, (*_HANDLERS.get(), handler)):
        yield


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


def user_frame(
    packages: tuple[str, ...] = ("mind", "torch", "triton"),
    rewritten: Callable[[CodeType], bool] = lambda code: False,
) -> FrameType | None:
    """The innermost caller that is the user's line: not in `packages` (by module or folder) or
    the standard library, not code a package generated (run in a namespace without `__name__`:
    torch's fx graphs and AOTAutograd's wrappers), and not user code a package `rewrote` and
    runs itself (Dynamo's bytecode for the user's function: the user's file, at the line it
    traced, not the line that called it)."""
    ours = tuple(
        {
            os.path.join(os.path.dirname(module.__file__), "")
            for name, module in list(sys.modules.items())
            if name.split(".")[0] in packages
            and os.path.isabs(getattr(module, "__file__", None) or "")
        }
    )
    stdlib = os.path.join(sysconfig.get_paths()["stdlib"], "")

    def internal(frame: FrameType) -> bool:
        filename, module = frame.f_code.co_filename, frame.f_globals.get("__name__")
        return (
            module is None
            or module.split(".")[0] in packages
            or filename.startswith(ours)
            or (filename.startswith(stdlib) and "site-packages" not in filename[len(stdlib) :])
            or rewritten(frame.f_code)
        )

    frame = sys._getframe(1)
    while frame is not None and internal(frame):
        frame = frame.f_back
    return frame


def warn_at_user(
    message: str, category: type[Warning], rewritten: Callable[[CodeType], bool] = lambda c: False
) -> None:
    """`warnings.warn` at the user's line (`user_frame`), through the filters and the registry
    of that line's module, as `warn` does with a stacklevel (which a count of frames cannot
    give: how many torch puts between the user and mind differs between its versions). Without
    the module's globals, as `warn` passes none: their loader raises for a module run with
    `python -m` (named `__main__`, loaded under its own name)."""
    frame = user_frame(rewritten=rewritten)
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    namespace = frame.f_globals
    warnings.warn_explicit(
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=namespace["__name__"],
        registry=namespace.setdefault("__warningregistry__", {}),
    )


@contextmanager
def located(loc: Location | None) -> Iterator[None]:
    """Errors raised inside without a location get `loc` (the op being processed)."""
    try:
        yield
    except MindError as exc:
        if exc.loc is not None or loc is None:
            raise
        raise MindError(str(exc), loc) from None
