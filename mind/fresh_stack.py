"""Compiling on a fresh Python stack.

CPython (3.11 and 3.12, which mind runs on) keeps frames in chunks of 16 KiB: a call that does not
fit in the current chunk allocates a new one, and its return frees it. A loop that calls a small
function (a comprehension is one) just where the caller's frames fill a chunk allocates and frees
a chunk per call. Where that happens depends on how deep the user's program called the compiled
function: on ResNet-18's training step, mind's fuse pass took 0.24 to 0.74 s per graph as the
caller's depth changed by a few frames, and 0.11 to 0.19 s on a new thread's stack at every depth.

So the passes run on a new thread, whose stack starts empty: the same depth whoever calls. The
thread gets the caller's context variables (diagnostic handlers, the loader's overlapped block)
and what torch keeps per thread that a pass may use: grad mode, and the current CUDA stream (and
so device) where CUDA is initialized, on which mm-templates times its benchmarks."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def on_fresh_stack(fn: Callable[[], T]) -> T:
    """`fn()` on a new thread, with the caller's context and torch thread state; its result,
    or its exception raised here."""
    context = contextvars.copy_context()
    grad = torch.is_grad_enabled()
    stream = torch.cuda.current_stream() if torch.cuda.is_initialized() else None
    outcome: list = []

    def run() -> None:
        torch.set_grad_enabled(grad)
        if stream is not None:
            torch.cuda.set_stream(stream)
        try:
            outcome.append((True, context.run(fn)))
        except BaseException as exc:  # noqa: BLE001  (raised again in the caller's thread)
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="mind-compile", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
