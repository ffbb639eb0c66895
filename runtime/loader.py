"""Import generated Triton modules from the kernel cache.

Triton 3.6 decides between compiling and interpreting when `@triton.jit` runs (it reads
`triton.knobs.runtime.interpret`, i.e. `TRITON_INTERPRET`, at decoration time), so a module is
imported with that knob set to what it is loaded for, and its kernels keep that choice whatever
the rest of the process does; interpreted modules also launch with the interpreted standard
library (see `interpreter.py`)."""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
import types

import torch
from triton import knobs

from .cache import cached_file, source_key
from .errors import GeneratedSource, wrap_call
from .interpreter import run_interpreted

_MODULES: dict[str, types.ModuleType] = {}
#: the interpret knob is process-wide: one import at a time flips it
_KNOB_LOCK = threading.Lock()


def default_interpret() -> bool:
    """Interpret when asked to by `TRITON_INTERPRET=1` or when there is no GPU."""
    return knobs.runtime.interpret or not torch.cuda.is_available()


def load(
    source: str, name: str, origin: str | None = None, interpret: bool | None = None
) -> types.ModuleType:
    """The module `source` defines (Triton kernels and `call(args)`), cached on disk and in this
    process. `interpret` runs its kernels in Triton's interpreter (CPU tensors); `origin` names the
    IR file the source came from, for error messages. The module's `call` re-raises kernel
    failures as `KernelError`, with the kernel's source."""
    interpret = default_interpret() if interpret is None else interpret
    key = source_key(source, interpret)
    if key not in _MODULES:
        _MODULES[key] = _import(cached_file(source, key), name, key, origin, interpret)
    return _MODULES[key]


def _import(path, name: str, key: str, origin: str | None, interpret: bool) -> types.ModuleType:
    module_name = f"mind_generated_{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{key[:16]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    source = GeneratedSource(str(path), origin or name)
    with _KNOB_LOCK, knobs.runtime.scope():
        knobs.runtime.interpret = interpret
        try:
            spec.loader.exec_module(module)  # binds (compiles) the kernels
        except Exception as exc:
            del sys.modules[module_name]
            error = source.error(exc)
            if error is None:
                raise
            raise error from exc
        except BaseException:
            del sys.modules[module_name]
            raise
    if interpret:
        run_interpreted(module)
    wrap_call(module, source)
    return module
