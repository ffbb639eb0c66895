"""Warnings at the user's line. Between it and mind, torch runs the user's function itself:
Dynamo's bytecode for it keeps the user's file and names the line it traced, not the call. Those
code objects are the keys of Dynamo's `orig_code_map` (in every torch mind supports)."""

from __future__ import annotations

from types import CodeType

import torch._dynamo.utils
from mind.ir import diagnostics


def rewritten_by_dynamo(code: CodeType) -> bool:
    return code in getattr(torch._dynamo.utils, "orig_code_map", ())


def warn_at_user(message: str, category: type[Warning]) -> None:
    """`warnings.warn` at the user's line that compiled or called the code."""
    diagnostics.warn_at_user(message, category, rewritten_by_dynamo)
