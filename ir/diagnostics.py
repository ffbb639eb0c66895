"""Source locations and the errors a user sees: `file:line:col: error: msg`, the line, a caret."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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

    def render(self) -> str:
        head = (
            f"{self.loc}: {self.severity}: {self.message}"
            if self.loc
            else f"{self.severity}: {self.message}"
        )
        line = self.loc.source_line() if self.loc else None
        if line is None:
            return head
        return f"{head}\n{line}\n{' ' * (self.loc.col - 1)}^"


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


@contextmanager
def located(loc: Location | None) -> Iterator[None]:
    """Errors raised inside without a location get `loc` (the op being processed)."""
    try:
        yield
    except MindError as exc:
        if exc.loc is not None or loc is None:
            raise
        raise MindError(str(exc), loc) from None
