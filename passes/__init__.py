"""Every pass registers itself on import."""

from . import to_aten  # noqa: F401
from .manager import (
    PASSES,
    Pass,
    PassManager,
    parse_pipeline,
    register_pass,
    resolve_pipeline,
    run_pipeline,
)

__all__ = [
    "PASSES",
    "Pass",
    "PassManager",
    "parse_pipeline",
    "register_pass",
    "resolve_pipeline",
    "run_pipeline",
]
