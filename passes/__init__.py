"""The passes, each registered by its module on import. Importing this package imports none
of them: `make_pass` (through it every pipeline) and `PASSES` import them all on first use.
Pass modules import nothing heavy at the top: the torch-bound work (AOTAutograd, the lowering
registry in `lowerings/`) loads when a pass that needs it runs."""

from .manager import (
    GraphPass,
    Pass,
    PassManager,
    make_pass,
    option,
    parse_pipeline,
    registered,
    resolve_pipeline,
    run_pipeline,
)

__all__ = [
    "PASSES",
    "GraphPass",
    "Pass",
    "PassManager",
    "make_pass",
    "option",
    "parse_pipeline",
    "registered",
    "resolve_pipeline",
    "run_pipeline",
]


def __getattr__(name: str):
    if name == "PASSES":  # every pass, by name: their modules imported now
        return registered()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
