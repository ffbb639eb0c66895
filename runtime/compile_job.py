"""What a compile worker does (runtime/compile_pool.py), without torch: it runs the kernels of a
generated module, the part of its source before `HOST` (Triton and mind's Triton helpers, no
torch), and compiles one of them for the target the loader names, from a description of its
binding that holds no torch object (`Spec`), into Triton's on-disk cache, where the loader's
bind then finds it under the same key. The loading process compiles through the same function
(`compile_for`), so both compile the same kernel, with the same options.

The worker imports no torch. On an H100 host its server took 4.8 s to get ready with torch and
mind's runtime imported, 0.5 s with Triton's compiler alone: longer than many a model's whole
first call, whose kernels the loading process then compiled alone. Cold first calls, bf16, the
loader's compiles in brackets: GPT-2 inference 5.9 s (7 of 7 kernels) -> 5.3 s (0), BERT's
training step 8.9 s (6 of 26) -> 7.2 s (0), ResNet-18 inference 7.6 s (11 of 17) -> 5.9 s (1);
Inductor 11.4, 14.7 and 10.3 s. Triton 3.6's argument specialization imports torch to recognize
its tensors, which a worker never passes (`Pointer` stands for them): the worker blocks the
import (`block_torch`), so that a compile never pays for it.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import linecache
import os
import pickle
import struct
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from mind.ir.generated import HOST
from triton.runtime.driver import driver


@dataclass(frozen=True)
class Pointer:
    """A pointer argument, as Triton specializes it: its element type (as torch names it,
    `torch.float32`: Triton reads the name after the dot, as it does of a torch dtype) and
    whether it is 16-byte aligned (`data_ptr`)."""

    dtype: str
    aligned: bool = True

    def data_ptr(self) -> int:
        return 0 if self.aligned else 8


@dataclass(frozen=True)
class Spec:
    """What compiling a bound kernel takes: its name in the module, one entry per parameter
    (`Pointer`, or the int, float or bool Triton types it by), the options Triton compiles with
    (config, constexprs and compile options), the device index, and whether to build Triton's
    host launcher too (where kernels do not launch through torch's)."""

    kernel: str
    signature: tuple
    options: dict[str, Any]
    device: int = 0
    launcher: bool = False


def compile_for(kernel: Any, spec: Spec, target: Any) -> Any:
    """Triton's compiled `kernel` (a `@triton.jit` function) for `target`, into Triton's cache
    (from it when there); nothing touches a GPU."""
    with compiling_for(target, spec.device):
        compiled = warm(kernel, spec)
    if spec.launcher:
        build_launcher(compiled)
    return compiled


def warm(kernel: Any, spec: Spec) -> Any:
    """Triton's compiled `kernel` for `spec`, for the active driver's target: the one way both
    the loading process and a worker compile, so that both find one key in Triton's cache."""
    return kernel.warmup(*spec.signature, grid=(1,), **spec.options)


def build_launcher(compiled: Any) -> None:
    """Make the host launcher loading `compiled` makes: Triton 3.6 compiles one in C per
    signature (a C compiler's run, cached on disk), Triton 3.8 has one for all. Nothing without
    a GPU driver, nor in a worker: Triton's GPU driver is made of torch's device functions, so
    there the loading process builds it when it binds the kernel."""
    try:
        gpu = driver.default
    except (RuntimeError, ImportError):  # no GPU here, or no torch (a worker)
        return
    gpu.launcher_cls(compiled.src, compiled.metadata)


class _CompileOnly:
    """A Triton driver that answers only what compiling asks (the device, its stream, the
    target), from what it is given: a process compiles for a GPU without initializing CUDA."""

    def __init__(self, target: Any, device: int):
        self.target, self.device = target, device

    def get_current_device(self) -> int:
        return self.device

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target


@contextlib.contextmanager
def compiling_for(target: Any, device: int = 0) -> Iterator[None]:
    """Triton compiles for `target` (device index `device`) inside, whatever this process's
    GPUs are, if any."""
    previous = driver._active
    driver.set_active(_CompileOnly(target, device))
    try:
        yield
    finally:
        driver._active = previous


def kernels_of(source: str) -> str:
    """The part of a generated module's source that defines its kernels (lines numbered as in
    the whole source, so Triton keys each kernel as the loader does)."""
    end = source.find("\n" + HOST + "\n")
    if end < 0:
        raise ValueError(f"not a generated module: no line '{HOST}'")
    return source[: end + 1]


#: the kernels of the modules a worker compiled for lately, by name, file and source
_MODULES: OrderedDict[tuple[str, str, str], dict] = OrderedDict()
#: how many modules a worker keeps (the loader sends one module's kernels at a time)
_KEPT_MODULES = 4


def compile_kernel(module: str, source: str, filename: str, spec: Spec, target: Any) -> None:
    """Compile `spec`'s kernel of the module for `target` as the loader will bind it (in a
    worker), into Triton's cache; the module's kernels run once for all of them."""
    key = (module, filename, source)
    if key not in _MODULES:
        _MODULES[key] = run_kernels(module, source, filename)
        while len(_MODULES) > _KEPT_MODULES:
            _MODULES.popitem(last=False)
    compile_for(_MODULES[key][spec.kernel], spec, target)


def run_kernels(module: str, source: str, filename: str) -> dict[str, Any]:
    """The namespace of a generated module's kernels, run under the loader's module name and
    file, at the same lines: Triton's key for a kernel holds its source, the functions it calls
    and the line it starts on, so the worker's compile is the one the loader finds. Triton reads
    a kernel's source from `filename`, or from `linecache` where the loader could not write the
    file."""
    if not os.path.exists(filename):
        remember_source(source, filename)
    namespace = {"__name__": module}
    exec(compile(kernels_of(source), filename, "exec"), namespace)
    return namespace


def remember_source(source: str, filename: str) -> None:
    """Put a module's source, which no file holds, where tracebacks and Triton (which reads a
    kernel's source) look for `filename`'s lines (`linecache`)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


class _NoTorch(importlib.abc.MetaPathFinder):
    """Fails every import of torch (an ImportError, as where torch is not installed)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.split(".", 1)[0] == "torch":
            raise ImportError(f"a compile worker imports no torch ('{name}')")
        return None


def block_torch() -> None:
    """Make importing torch fail in this process (a worker's), as if it were not installed:
    nothing a worker runs needs it."""
    if "torch" not in sys.modules and not any(isinstance(f, _NoTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoTorch())


# -- the pipe protocol: a 4-byte length, then a pickle -----------------------------------------
def send(stream: BinaryIO, value: object) -> None:
    data = pickle.dumps(value)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def receive(stream: BinaryIO) -> object:
    header = stream.read(4)
    if len(header) < 4:
        raise EOFError
    return pickle.loads(stream.read(struct.unpack("<I", header)[0]))


def serve(jobs: BinaryIO, results: BinaryIO) -> None:
    """A worker's loop: say it is ready, then compile each job it is sent (the arguments of
    `compile_kernel`) and answer how many seconds it took, or None where it failed."""
    send(results, "ready")
    while True:
        try:
            job = receive(jobs)
        except EOFError:
            return
        start = time.perf_counter()
        try:
            compile_kernel(*job)
            seconds = time.perf_counter() - start
        except Exception:  # the loader compiles it again and reports the error
            seconds = None
        send(results, seconds)
