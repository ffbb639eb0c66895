"""Python's cyclic garbage collector while a graph compiles.

A compile makes millions of objects and keeps many (Dynamo's trace, AOTAutograd's graphs, mind's
IR). Full collections come each time a quarter more objects than the process had survive, so a
model's compile met one to three, each a scan of every object of the process, torch's millions
included: 0.2-0.4 s apiece on a 4-layer transformer, a second per 16 layers. Quieted, the
collector scans only what the compile made.

Quieting freezes the heap as it stands (`gc.freeze`: what exists is out of the collector's sight;
young collections still free the compile's garbage) and unfreezes it after. A program that froze
objects itself would lose its freeze at `unfreeze` (a forking server freezes its heap; the Python
of the H200 machine mind is measured on has a few hundred objects frozen before any of mind's code
runs): there the collector is paused instead (`gc.disable`), and what the compile leaves in cycles
waits for its end.

Each compile Dynamo runs (a frame's trace and its backend; a lazy backward) is quieted through
Dynamo's compile callbacks, registered when mind's backend loads (which `backend="mind"` does,
before the first trace). `torch._dynamo.reset()` clears every callback, to leave Dynamo as in a
new process; in a new process that loaded mind they are registered, so the reset puts them back
(Dynamo has no hook after its clear: the handler's `clear` is wrapped). They serve other
backends' compiles in the process too: quieting changes nothing a compile makes, only what its
collections scan."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

import torch._dynamo

#: how to undo what quieted the collector, while it is quiet (one for the process, as the
#: collector is)
_undo: Callable[[], None] | None = None
#: whether the compile Dynamo runs now quieted the collector (its callbacks bracket the
#: outermost compile)
_dynamo_quieted = False


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The block runs with the collector quiet; inside another such block, which restores it."""
    quieted = _quiet()
    try:
        yield
    finally:
        if quieted:
            _restore()


def _quiet() -> bool:
    """Freeze the heap, or where the program froze objects itself, pause the collector; nothing
    if the collector is off. Whether this call quieted it. Only the outermost call counts the
    frozen objects, which walks them all (50 ms for torch's millions). An inner one freezes again
    what the outer block made so far (Dynamo's trace, when mind's backend starts): a freeze
    leaves full collections frequent, each a scan of every unfrozen object, until the young
    survivors outnumber a quarter of what it left, so the trace's objects would be scanned over
    and over while AOTAutograd and the passes run (on a 16-layer training step, 0.023 s of
    collections per layer against 0.014)."""
    global _undo
    if _undo is not None:
        if _undo is gc.unfreeze:
            gc.freeze()  # (cheap: generations are moved, not walked)
        return False
    if not gc.isenabled():
        return False
    if gc.get_freeze_count():
        gc.disable()
        _undo = gc.enable
    else:
        gc.freeze()
        _undo = gc.unfreeze
    return True


def _restore() -> None:
    global _undo
    undo, _undo = _undo, None
    if undo is not None:
        undo()


def quiet_while_dynamo_compiles() -> None:
    """Register Dynamo's compile callbacks that quiet the collector, and again after each of
    Dynamo's resets."""
    handler = torch._dynamo.callback_handler
    if _dynamo_compile_starts not in handler.start_callbacks:
        handler.register_start_callback(_dynamo_compile_starts)
        handler.register_end_callback(_dynamo_compile_ends)
    if not getattr(handler.clear, "keeps_mind_quiet", False):
        handler.clear = _clear_then_register(handler.clear)


def _clear_then_register(clear: Callable[[], None]) -> Callable[[], None]:
    """The handler's `clear`, then mind's callbacks registered again (also where the clear
    raises: it empties the lists before it checks for callbacks still pending)."""

    def clear_then_register() -> None:
        try:
            clear()
        finally:
            quiet_while_dynamo_compiles()

    clear_then_register.keeps_mind_quiet = True  # type: ignore[attr-defined]
    return clear_then_register


def _dynamo_compile_starts(_: object) -> None:
    global _dynamo_quieted
    _dynamo_quieted = _quiet()


def _dynamo_compile_ends(_: object) -> None:
    """(Registered inside a compile, the callbacks see its end and not its start: nothing to do.)"""
    global _dynamo_quieted
    if _dynamo_quieted:
        _dynamo_quieted = False
        _restore()
