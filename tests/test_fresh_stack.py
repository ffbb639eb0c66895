"""mind/fresh_stack.py: the passes run on a new thread's stack, at the same depth whoever calls,
with the caller's context variables and torch thread state, their result or exception handed
back."""

from __future__ import annotations

import contextvars
import sys
import threading

import pytest
import torch

from mind.fresh_stack import on_fresh_stack

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def depth() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def called_at(extra: int) -> int:
    """The depth `on_fresh_stack` runs its function at, called `extra` frames deeper."""
    return called_at(extra - 1) if extra else on_fresh_stack(depth)


def test_the_depth_does_not_depend_on_the_caller():
    depths = {called_at(extra) for extra in (0, 3, 17, 40)}
    assert len(depths) == 1


def test_context_and_grad_mode_are_the_callers():
    token = SEEN.set("caller")
    try:
        with torch.no_grad():
            got = on_fresh_stack(lambda: (SEEN.get(), torch.is_grad_enabled()))
    finally:
        SEEN.reset(token)
    assert got == ("caller", False)
    assert on_fresh_stack(threading.current_thread) is not threading.current_thread()


def test_an_exception_is_raised_in_the_caller():
    error = ValueError("from the pass")

    def fails():
        raise error

    with pytest.raises(ValueError) as raised:
        on_fresh_stack(fails)
    assert raised.value is error
