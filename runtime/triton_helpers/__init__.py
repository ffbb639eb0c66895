"""Device-side helpers that generated kernels call as `triton_helpers.<name>`, by family:
elementwise (NaN-propagating max/min, Python-style integer division, signs), reductions (products,
argmax/argmin with indices, scan combines, a stable sort), cooperation (a group barrier), and the
math `tl` lacks with the f16/bf16 tile product (which Triton's interpreter gets wrong for bf16).

Triton fixes compiled-or-interpreted when `@triton.jit` decorates (triton 3.6 reads
TRITON_INTERPRET then), and libdevice cannot run in the interpreter. So this package is loaded
once per mode (`for_current_mode()`, which generated code calls at import), its modules with it:
the compiled copy takes its math (`math`) from `math_compiled` (libdevice), the interpreted copy
from `math_interpreted` (`tl` primitives, or torch on the host values).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from triton import knobs

from .cooperation import *  # noqa: F403 (each family's helpers, as `triton_helpers.<name>`)
from .elementwise import *  # noqa: F403
from .math import *  # noqa: F403
from .reductions import *  # noqa: F403

#: the mode this copy of the package was decorated in
INTERPRET = bool(knobs.runtime.interpret)
_COPIES: dict[bool, types.ModuleType] = {}


def for_current_mode() -> types.ModuleType:
    """These helpers decorated for the interpret setting in force now: the package itself, or a
    copy loaded under another name, whose modules (relative imports) load afresh with it."""
    mode = bool(knobs.runtime.interpret)
    if mode == INTERPRET:
        return sys.modules[__name__]
    if mode not in _COPIES:
        name = f"{__name__}_{'interpreted' if mode else 'compiled'}"
        spec = importlib.util.spec_from_file_location(
            name, __file__, submodule_search_locations=[str(Path(__file__).parent)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _COPIES[mode] = module
    return _COPIES[mode]
