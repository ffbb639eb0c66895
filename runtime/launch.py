"""Launching generated kernels with nothing recomputed per call.

A generated module binds each kernel once, when it loads: `bind` compiles it for the arguments'
types and alignment (Triton's `warmup`, with `compile_job.Pointer`s standing for pointers, as
Triton's `MockTensor` does, and as a compile worker compiles it) and binds a launcher of the
compiled kernel: torch's C++ launcher, as Inductor launches (static_launch.py), or else Triton's
(`CompiledKernel.run`, with the function handle and packed metadata kept). A launch is then one
call: no argument specialization, no cache key, no lookup. That is the level below
`CompiledKernel[grid]`, whose runner passes only the arguments it is given while the launcher
wants every kernel parameter, constexprs included, in signature order (mind's kernels put their
constexprs last).

What the specialization assumed must hold at run time: integer arguments that vary between
calls are compiled unspecialized (`do_not_specialize` on the kernel), a pointer never aligned is
compiled so (`misaligned`), and a pointer whose alignment only the run knows (target/bindings.py
says which) is checked at each launch: a misaligned one takes Triton's JIT path, which
specializes for what it gets.

The helpers the generated `call` uses (allocation, reinterpretation, the raw stream) are torch's
C++ fast paths where this torch has them, the public functions otherwise.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from mind.ir.context import bound
from mind.ir.logs import channel
from triton import knobs
from triton.runtime.driver import driver
from triton.runtime.interpreter import InterpretedFunction

from .cache import launch_key, recall_launch, remember_launch
from .compile_job import Pointer, Spec, compile_for, warm
from .cooperative import LAUNCHER_PARAMETERS, Cooperation
from .errors import KernelError
from .static_launch import enabled as static_launch_enabled
from .static_launch import recorded_launcher, static_launcher

log = channel("launch")

#: placeholder values that make Triton type an unspecialized argument i32 / i64 / fp32 / i1
I32, I64, F32, I1 = 3, 2**40, 0.5, True
#: the alignment Triton specializes pointers on
ALIGNMENT = 16
#: how a kernel with device asserts compiles (Inductor's options): debug, so that the asserts
#: stay, without Triton's integer-overflow asserts, which eager never makes
DEBUG_OPTIONS = {"debug": True, "sanitize_overflow": False}
#: how every kernel compiles for CUDA: libdevice keeping denormals, as eager's CUDA math does.
#: Triton's default flushes them to zero (`nvvm-reflect-ftz`), so an f32 denormal reaches
#: libdevice as 0: lgamma gives inf where eager gives ~100, log10 -inf, asin 0. Inductor keeps
#: the flush unless `eager_numerics.disable_ftz`. (ROCm's Triton has no such option.)
EAGER_MATH_OPTIONS = {} if torch.version.hip else {"enable_reflect_ftz": False}

Launcher = Callable[..., None]


@dataclass
class Binding:
    """A kernel to bind: the arguments of one `bind` call."""

    kernel: Any
    device: torch.device
    signature: tuple
    checked: tuple[int, ...]
    constexprs: dict[str, Any]
    options: dict[str, Any]
    #: a cooperative kernel's grid and workspace (runtime/cooperative.py); None for others
    cooperation: Cooperation | None = None
    #: the key of its module in the module cache (`cache.source_key`), set by the loader: a
    #: kernel launched through torch's launcher keeps a launch record under it (and its binding)
    module_key: str | None = None
    #: its launch record, when `recall` found one
    kept: dict | None = None

    @property
    def name(self) -> str:
        return self.kernel.__name__

    @property
    def call_signature(self) -> tuple:
        """The signature of what a call passes: all but what the launcher adds itself."""
        added = LAUNCHER_PARAMETERS if self.cooperation else 0
        return self.signature[: len(self.signature) - added]

    def compile(self):
        """Triton's compiled kernel for this signature (from Triton's cache when it has it)."""
        start = time.perf_counter()
        with torch.cuda.device(self.device):
            compiled = self._warmup()
        log.debug("kernel %s: compiled in %.1f ms", self.name, 1e3 * (time.perf_counter() - start))
        return compiled

    def spec(self) -> Spec:
        """What compiling the kernel takes, without torch objects: what a compile worker is
        sent. Triton's host launcher (a C compiler's run per signature in Triton 3.6: 0.2 s) is
        built too where kernels do not launch through torch's launcher; a kernel that torch's
        launcher turns out not to take (scratch memory, clusters) has it built when it binds."""
        signature = tuple(_untorched(entry) for entry in self.signature)
        index = self.device.index or 0
        return Spec(self.name, signature, self.options, index, not static_launch_enabled())

    def precompile(self, target: Any) -> None:
        """Compile for `target` into Triton's on-disk cache, where `compile` finds it, loading
        nothing on a GPU (no CUDA context), as a compile worker does."""
        compile_for(self.kernel, self.spec(), target)

    def _warmup(self):
        names = [p.name for p in self.kernel.params]
        if names[len(names) - len(self.constexprs) :] != list(self.constexprs):
            raise KernelError(f"kernel '{self.name}' must take its constexprs last: {names}")
        return warm(self.kernel, self.spec())

    @property
    def interpreted(self) -> bool:
        """Whether the kernel runs in Triton's interpreter (CPU tensors)."""
        return isinstance(self.kernel, InterpretedFunction) or bool(knobs.runtime.interpret)

    @property
    def record_key(self) -> str | None:
        """The key of its launch record: where its module is cached, and it launches through
        torch's launcher."""
        if self.module_key is None or not static_launch_enabled():
            return None
        return launch_key(self.module_key, repr(self.spec()))

    def recall(self) -> bool:
        """Whether an earlier process left this kernel's launch record: then it binds from it,
        with no compile, nor Triton's JIT or cache (`kept`)."""
        key = self.record_key
        self.kept = recall_launch(key) if key is not None else None
        return self.kept is not None

    def launcher(self) -> Launcher:
        if self.interpreted:
            log.debug("kernel %s: Triton's interpreter", self.name)
            launch = _jit_launcher(self.kernel, self.options)
            return self.cooperation.interpreted(launch) if self.cooperation else launch
        return self._recorded() or self._bound(self.compile())

    def _recorded(self) -> Launcher | None:
        """Its launcher from its launch record, where `recall` found one that binds."""
        if self.kept is None or _hooked():
            return None
        count = len(self.signature)
        launch = recorded_launcher(self.name, self.kept, self.device, count)
        if launch is None:
            return None
        log.debug("kernel %s: bound from its launch record", self.name)
        return self._sized(self._checked(launch), launch.kernel)

    def _bound(self, compiled) -> Launcher:
        if _hooked():  # a profiler listens to launches: Triton's own path tells it about each
            log.info("kernel %s: Triton's launch path (a profiler hooks launches)", self.name)
            return self._sized(_jit_launcher(self.kernel, self.options), compiled)
        key = self.record_key
        keep = None if key is None else functools.partial(remember_launch, key)
        launch = static_launcher(compiled, self.device, len(self.signature), keep)
        launch = launch or _triton_launcher(compiled, self.device, tuple(self.constexprs.values()))
        return self._sized(self._checked(launch), compiled)

    def _sized(self, launch: Launcher, kernel) -> Launcher:
        """`launch`, for a cooperative kernel with its grid sized from what `kernel` (Triton's
        compiled kernel, or torch's launcher's object of it) holds on an SM."""
        if self.cooperation is None:
            return launch
        return self.cooperation.launcher(launch, kernel, self.device, self.name)

    def _checked(self, launch: Launcher) -> Launcher:
        """`launch`, checking the alignment of the pointers at `checked` first: a misaligned one
        takes Triton's JIT path, which specializes for what it gets."""
        log.debug("kernel %s: bound, alignment checked for arguments %s", self.name, self.checked)
        checked = self.checked
        if not checked:
            return launch
        jit = _jit_launcher(self.kernel, self.options)

        def launch_checked(gx: int, gy: int, gz: int, stream: int, *args) -> None:
            for i in checked:
                if args[i].data_ptr() % ALIGNMENT:
                    return jit(gx, gy, gz, stream, *args)
            launch(gx, gy, gz, stream, *args)

        return launch_checked


def target_of(device: torch.device) -> Any:
    """What Triton compiles for on `device` (a `GPUTarget`): what a compile worker is told."""
    with torch.cuda.device(device):
        return driver.active.get_current_target()


#: while a loader defers binding: the bindings a module asked for, in order
_DEFERRED: ContextVar[list[Binding] | None] = ContextVar("mind_deferred_bindings", default=None)


@contextmanager
def deferred() -> Iterator[list[Binding]]:
    """Inside, `bind` returns its `Binding` instead of a launcher (listed in the yielded list),
    so a loader can compile a module's kernels in parallel before binding them."""
    with bound(_DEFERRED, []) as bindings:
        yield bindings


def bind(kernel, device: torch.device, signature: tuple, checked: tuple[int, ...] = (),
         *, num_warps: int, num_stages: int, cooperative: tuple[int, int] | None = None,
         **constexprs) -> Launcher | Binding:  # fmt: skip
    """A launcher `fn(grid_x, grid_y, grid_z, stream, *args)` for `kernel` on `device`.
    `signature` gives one entry per non-constexpr parameter: a torch dtype for a pointer
    (`misaligned(dtype)` for one that is never 16-byte aligned), an int for an integer (its value
    when static, `I32`/`I64` when it varies: the kernel must not specialize on it), `F32`/`I1`
    for a float/bool passed by value. Pointers at the positions `checked` are assumed aligned
    and checked at each launch: a misaligned one takes Triton's JIT path, which specializes for
    what it gets. `cooperative`: (programs a group, partials a program) of a cooperative kernel,
    whose last three parameters the launcher passes (runtime/cooperative.py)."""
    options = {"num_warps": num_warps, "num_stages": num_stages, **constexprs}
    options |= compile_options(kernel)
    cooperation = Cooperation(*cooperative) if cooperative else None
    binding = Binding(kernel, device, signature, tuple(checked), constexprs, options, cooperation)
    pending = _DEFERRED.get()
    if pending is None:
        return binding.launcher()
    pending.append(binding)
    return binding


def compile_options(kernel) -> dict[str, Any]:
    """What a kernel compiles with besides its config: `EAGER_MATH_OPTIONS`, and
    `DEBUG_OPTIONS` for one declared `@triton.jit(debug=True)` (it holds device asserts). The
    bound launcher, the JIT fallback and the compile workers all take them from here, so all
    compile the same kernel (and find it under the same key in Triton's cache)."""
    debug = DEBUG_OPTIONS if getattr(kernel, "debug", None) else {}
    return {**EAGER_MATH_OPTIONS, **debug}


def _hooked() -> bool:
    """Whether launch hooks are installed (Triton 3.6+ keeps them in a `HookChain`, empty when
    nobody listens; older versions use None)."""
    hook = knobs.runtime.launch_enter_hook
    return hook is not None and bool(getattr(hook, "calls", True))


def _triton_launcher(compiled, device: torch.device, constexprs: tuple) -> Launcher:
    """Triton's launcher of `compiled` (`CompiledKernel.run`), its handle and metadata bound: the
    binary loads on `device` now, not at the first launch."""
    with torch.cuda.device(device):
        run = compiled.run
    function, metadata = compiled.function, compiled.packed_metadata

    def launch(gx: int, gy: int, gz: int, stream: int, *args) -> None:
        run(gx, gy, gz, stream, function, metadata, None, None, None, *args, *constexprs)

    return launch


def _jit_launcher(kernel, options: dict) -> Launcher:
    """Triton's own launch path (`kernel[grid](...)`): the interpreter's, which has no compiled
    form to bind, and the fallback for what a bound launcher was not compiled for."""

    def launch(gx: int, gy: int, gz: int, stream, *args) -> None:
        kernel[(gx, gy, gz)](*args, **options)

    return launch


def _untorched(entry: Any) -> Any:
    """A signature entry as a compile worker takes it: a pointer's torch dtype as a `Pointer`."""
    if isinstance(entry, torch.dtype):
        return Pointer(str(entry))
    if isinstance(entry, misaligned):
        return Pointer(str(entry.dtype), aligned=False)
    return entry


class misaligned:  # noqa: N801  (reads as a dtype wrapper in generated signatures)
    """A pointer argument of `dtype` compiled without the 16-byte alignment assumption (a view
    at a misaligned offset): Triton specializes on `data_ptr()`, as for its `MockTensor`."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype

    @staticmethod
    def data_ptr() -> int:
        return ALIGNMENT // 2


def _empty_strided(device: str) -> Callable[..., torch.Tensor]:
    def empty(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=device)

    return empty


def _fast(name: str, fallback):
    """torch's C++ helper `name` (the ones Inductor's wrappers call), or `fallback`."""
    guards = getattr(torch._C._dynamo, "guards", None)
    return getattr(guards, name, None) or fallback


empty_strided_cpu = _fast("_empty_strided_cpu", _empty_strided("cpu"))
empty_strided_cuda = _fast("_empty_strided_cuda", _empty_strided("cuda"))
reinterpret_tensor = _fast(
    "_reinterpret_tensor",
    lambda x, size, stride, offset: torch.as_strided(x, size, stride, x.storage_offset() + offset),
)


#: the current CUDA stream of a device, as the launcher takes it (a CPU-only torch has none)
get_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
#: makes a device current for a block: allocation and launches follow it
device_guard = torch.cuda._DeviceGuard
