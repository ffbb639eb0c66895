"""mind: a PyTorch compiler whose every stage is a dialect with a text form.

`torch.compile(fn, backend="mind")` finds the backend through the package's entry point; the
Dynamo-facing pieces (`capture`, the backend) load on first use, so tools that only read and
write IR (mind-opt, mind-translate) start without importing Dynamo."""

from mind.ir.core import Module
from mind.ir.diagnostics import MindError
from mind.parser import parse

_LAZY = {
    "capture": ("mind.frontend", "capture"),
    "MindFallbackWarning": ("mind.backend", "MindFallbackWarning"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mind' has no attribute '{name}'")
    import importlib

    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


__all__ = ["MindError", "MindFallbackWarning", "Module", "capture", "parse"]
