"""Every pass registers itself on import; importing this package loads them all. Pass modules
import nothing heavy at the top: the torch-bound work (AOTAutograd, the lowering registry in
`lowerings/`) loads when a pass that needs it runs."""

import importlib
import pkgutil

from .manager import (
    PASSES,
    GraphPass,
    Pass,
    PassManager,
    make_pass,
    option,
    parse_pipeline,
    resolve_pipeline,
    run_pipeline,
)

for _module in pkgutil.iter_modules(__path__):
    if not _module.ispkg:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "PASSES",
    "GraphPass",
    "Pass",
    "PassManager",
    "make_pass",
    "option",
    "parse_pipeline",
    "resolve_pipeline",
    "run_pipeline",
]
