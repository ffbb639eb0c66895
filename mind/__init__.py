"""mind: a PyTorch compiler whose every stage is a dialect with a text form.

`torch.compile(fn, backend="mind")` finds the backend through the package's entry point. Every
name here loads on first use: the tools start without sympy, lark or torch, and those that only
read and write IR (mind-opt, mind-translate) never import torch or Dynamo."""

from importlib import import_module as _import_module

_LAZY = {
    "parse": ("mind.parser", "parse"),
    "Module": ("mind.ir.core", "Module"),
    "MindError": ("mind.ir.diagnostics", "MindError"),
    "capture": ("mind.frontend", "capture"),
    "MindFallbackWarning": ("mind.fallback", "MindFallbackWarning"),
    "set_logs": ("mind.ir.logs", "set_logs"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mind' has no attribute '{name}'")
    module, attr = _LAZY[name]
    return getattr(_import_module(module), attr)


def __dir__() -> list[str]:
    """The lazy names too (`dir(mind)` lists `capture`), beside what is loaded."""
    return sorted({*globals(), *_LAZY})


__all__ = ["MindError", "MindFallbackWarning", "Module", "capture", "parse", "set_logs"]
