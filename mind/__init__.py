"""mind: a PyTorch compiler whose every stage is a dialect with a text form."""

from mind.ir.core import Module
from mind.ir.diagnostics import MindError
from mind.parser import parse

from .capture import capture

__all__ = ["MindError", "Module", "capture", "parse"]
