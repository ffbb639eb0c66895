"""Context variables set for a block: the one idiom of mind's scoped settings (size hints,
diagnostic handlers, a loader's deferred bindings), which nest and follow threads and tasks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def bound(var: ContextVar[T], value: T) -> Iterator[T]:
    """Inside, `var` holds `value` (yielded); after, what it held before."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
