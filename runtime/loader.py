"""Import generated Triton modules from the kernel cache.

Triton 3.6 decides between compiling and interpreting when `@triton.jit` runs (it reads
`triton.knobs.runtime.interpret`, i.e. `TRITON_INTERPRET`, at decoration time), so a module is
imported with that knob set to what it is loaded for, and its kernels keep that choice whatever
the rest of the process does; interpreted modules also launch with the interpreted standard
library (see `interpreter.py`)."""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

import torch
from mind.ir.context import bound
from mind.ir.logs import channel
from triton import knobs

from .autotune import Tuned
from .cache import cached_file, source_key
from .compile_pool import Batch, count_kernels, exec_source, submit
from .errors import GeneratedSource, KernelError, wrap_call
from .interpreter import run_interpreted
from .launch import Binding, Launcher, deferred
from .progress import progress

log = channel("launch")
#: the modules loaded in this process, by source key
_MODULES: dict[str, types.ModuleType] = {}
#: the interpret knob is process-wide: one import at a time flips it
_KNOB_LOCK = threading.Lock()
#: inside `overlapped`: how to finish each module loaded there, oldest first
_OVERLAPPED: ContextVar[list[Callable[..., None]] | None] = ContextVar(
    "mind_overlapped", default=None
)


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
    could not be written. Its kernels compile in the worker pool, then bind (at the end of an
    `overlapped` block, inside one)."""
    module_name = f"mind_generated_{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{key[:16]}"
    filename = str(path) if path is not None else f"<mind-generated {module_name}>"
    module = types.ModuleType(module_name)
    module.__file__ = filename
    source = GeneratedSource(text, filename, origin or name)
    sys.modules[module_name] = module
    pending = _OVERLAPPED.get()
    try:
        with _interpreting(interpret):
            bindings = _execute(module, text, filename, source)
        batch = None
        if not interpret:
            batch = submit(module_name, text, filename, _unrecorded(module_name, bindings, key))
        finish = functools.partial(bind_kernels, module, source, batch, interpret)
        if batch is not None and pending is not None:
            pending.append(finish)  # bound at the end of the overlapped block
        else:
            finish(raising=True)
    except BaseException:
        del sys.modules[module_name]
        raise
    if interpret:
        run_interpreted(module)
    wrap_call(module, source)
    return module


def _unrecorded(module: str, bindings: list[Binding], module_key: str) -> list[Binding]:
    """The bindings left to compile: those with no launch record of an earlier process, which
    bind from it when their module binds (runtime/static_launch.py)."""
    for binding in bindings:
        binding.module_key = module_key
    left = [binding for binding in bindings if not binding.recall()]
    if len(left) < len(bindings):
        recorded = len(bindings) - len(left)
        log.info("%s: %d of %d kernels bind from launch records", module, recorded, len(bindings))
        count_kernels(recorded=recorded)
    return left


@contextlib.contextmanager
def _interpreting(interpret: bool) -> Iterator[None]:
    """Triton's interpret knob set to `interpret` (one module at a time: the knob is global)."""
    with _KNOB_LOCK, knobs.runtime.scope():
        knobs.runtime.interpret = interpret
        yield


def _execute(
    module: types.ModuleType, text: str, filename: str, source: GeneratedSource
) -> list[Binding]:
    """Run the module with its bindings deferred; the bindings, in order."""
    try:
        with deferred() as bindings:
            exec_source(text, filename, module.__dict__)
    except Exception as exc:
        error = source.error(exc)
        if error is None:
            raise
        raise error from exc
    return bindings


def bind_kernels(
    module: types.ModuleType,
    source: GeneratedSource,
    batch: Batch | None,
    interpret: bool,
    raising: bool = True,
) -> None:
    """Wait for the module's kernels to compile (`batch`; tuning its tuned launches meanwhile),
    binding each as soon as it is compiled, then put each launcher in place of its `Binding` (or
    `Tuned`: the winner). A kernel that fails raises a KernelError naming it, or, not
    `raising` (the module was handed out already), binds to a launcher that raises it."""
    targets = {n: v for n, v in vars(module).items() if isinstance(v, Binding | Tuned)}
    names = {id(v): n for n, v in targets.items()}
    launchers: dict[str, Launcher | Exception] = {}

    def bind(value: Binding | Tuned) -> None:
        try:
            launchers[names[id(value)]] = value.launcher()
        except Exception as exc:
            launchers[names[id(value)]] = exc

    tuned = [v for v in targets.values() if isinstance(v, Tuned)]
    total = len(batch.bindings) + len(tuned) if batch is not None and tuned else 0
    with _interpreting(interpret), progress(total, "mind: tuning kernels") as bar:
        if batch is not None:
            batch.wait(tuned, bar, lambda b: bind(b) if id(b) in names else None)
        for name, value in targets.items():
            if name not in launchers:
                bind(value)
    for name, value in targets.items():
        launcher = launchers[name]
        if isinstance(launcher, Exception):
            error = source.error(launcher, _kernel_name(value))
            if raising:
                raise error from launcher
            launcher = _failing(error)
        setattr(module, name, launcher)


def _failing(error: KernelError) -> Launcher:
    """A launcher that raises `error`: the kernel failed to compile after its module was
    handed out, so its first call reports it."""

    def launch(*args) -> None:
        raise error

    return launch


@contextlib.contextmanager
def overlapped() -> Iterator[None]:
    """Modules loaded inside return before their kernels are compiled: the compile pool's workers
    compile them while the caller goes on (AOTAutograd hands mind a training graph's backward,
    whose passes run, while its forward's kernels compile). The block's end compiles what is
    left and binds, oldest module first. A kernel that fails then is reported by the module's
    first call (a `KernelError` naming it, as an interpreted kernel's is), since the module was
    handed out already. Nested blocks finish at the outer one's end."""
    if _OVERLAPPED.get() is not None:
        yield
        return
    pending: list[Callable[..., None]] = []
    try:
        with bound(_OVERLAPPED, pending):
            yield
    finally:
        for finish in pending:
            finish(raising=False)


@contextlib.contextmanager
def at_once() -> Iterator[None]:
    """Inside an `overlapped` block, modules loaded here bind before `load` returns: for a
    caller that runs them at once (mm-templates timing a template against ATen)."""
    with bound(_OVERLAPPED, None):
        yield


def _kernel_name(value: Binding | Tuned) -> str:
    return value.name if isinstance(value, Binding) else value.bindings[0].name
