"""Import generated Triton modules from the kernel cache.

Triton 3.6 decides between compiling and interpreting when `@triton.jit` runs (it reads
`triton.knobs.runtime.interpret`, i.e. `TRITON_INTERPRET`, at decoration time), so a module is
imported with that knob set to what it is loaded for, and its kernels keep that choice whatever
the rest of the process does; interpreted modules also launch with the interpreted standard
library (see `interpreter.py`)."""

from __future__ import annotations

import re
import sys
import threading
import types
from pathlib import Path

import torch
from triton import knobs

from .autotune import Tuned
from .cache import cached_file, source_key
from .compile_pool import compile_all, exec_source
from .errors import GeneratedSource, wrap_call
from .interpreter import run_interpreted
from .launch import Binding, deferred

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
        _MODULES[key] = _import(source, cached_file(source, key), name, key, origin, interpret)
    return _MODULES[key]


def _import(
    text: str, path: Path | None, name: str, key: str, origin: str | None, interpret: bool
) -> types.ModuleType:
    """Execute `text` as a module: from its cache file `path`, or from memory when the cache
    could not be written. Its kernels compile in the worker pool, then bind."""
    module_name = f"mind_generated_{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{key[:16]}"
    filename = str(path) if path is not None else f"<mind-generated {module_name}>"
    module = types.ModuleType(module_name)
    module.__file__ = filename
    source = GeneratedSource(text, filename, origin or name)
    sys.modules[module_name] = module
    try:
        with _KNOB_LOCK, knobs.runtime.scope():
            knobs.runtime.interpret = interpret
            _execute(module, text, filename, source, interpret)
    except BaseException:
        del sys.modules[module_name]
        raise
    if interpret:
        run_interpreted(module)
    wrap_call(module, source)
    return module


def _execute(
    module: types.ModuleType, text: str, filename: str, source: GeneratedSource, interpret: bool
) -> None:
    """Run the module with its bindings deferred, compile its kernels (in parallel when the
    compile pool runs) and tune its tuned launches, then bind each one in place of its `Binding`
    (or `Tuned`: the winner); a kernel that fails raises a KernelError naming it."""
    try:
        with deferred() as bindings:
            exec_source(text, filename, module.__dict__)
    except Exception as exc:
        error = source.error(exc)
        if error is None:
            raise
        raise error from exc
    tuned = [value for value in vars(module).values() if isinstance(value, Tuned)]
    if not interpret:
        compile_all(module.__name__, text, filename, bindings, tuned)
    for name, value in list(vars(module).items()):
        if isinstance(value, Binding | Tuned):
            try:
                setattr(module, name, value.launcher())
            except Exception as exc:
                raise source.error(exc, _kernel_name(value)) from exc


def _kernel_name(value: Binding | Tuned) -> str:
    return value.name if isinstance(value, Binding) else value.bindings[0].name
