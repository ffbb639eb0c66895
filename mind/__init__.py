"""mind: a PyTorch compiler whose every stage is a dialect with a text form.

`torch.compile(fn, backend="mind")` finds the backend through the package's entry point. Every
name here loads on first use: the tools start without sympy, lark or torch, and those that only
read and write IR (mind-opt, mind-translate) never import torch or Dynamo."""

import importlib

_LAZY = {
    "parse": ("mind.parser", "parse"),
    "Module": ("mind.ir.core", "Module"),
    "MindError": ("mind.ir.diagnostics", "MindError"),
    "capture": ("mind.frontend", "capture"),
    "MindFallbackWarning": ("mind.backend", "MindFallbackWarning"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mind' has no attribute '{name}'")
    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


__all__ = ["MindError", "MindFallbackWarning", "Module", "capture", "parse"]
