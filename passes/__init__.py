"""Every pass registers itself on import; importing this package loads them all."""

import importlib
import pkgutil

from .manager import (
    PASSES,
    Pass,
    PassManager,
    parse_pipeline,
    register_pass,
    resolve_pipeline,
    run_pipeline,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "PASSES",
    "Pass",
    "PassManager",
    "parse_pipeline",
    "register_pass",
    "resolve_pipeline",
    "run_pipeline",
]
