"""mind: a PyTorch compiler whose every stage is a dialect with a text form."""

from mind.ir.core import Module
from mind.ir.diagnostics import MindError
from mind.parser import parse

from .backend import MindFallbackWarning, register
from .capture import capture

register()

__all__ = ["MindError", "MindFallbackWarning", "Module", "capture", "parse"]
