"""Launching compiled kernels through torch's C++ launcher (`torch._C._StaticCudaLauncher`, which
Inductor launches its kernels through).

Triton's own launcher (`CompiledKernel.run`) works out at each launch what never changes: its
Python wrapper allocates (or not) scratch memory and, in newer Triton, builds closures, then its
C launcher parses a format string of every parameter, constexprs included. torch's launcher
takes what the cubin takes and nothing else, so what a launch passes is worked out once, here:
the cubin's function, its arguments' types, which of the call's arguments are Triton's constants
(a constexpr, or an integer Triton specialized, such as a size of 1) and so not passed, and the
null scratch pointers a newer Triton's cubin also takes. A launch is then one C++ call.

A kernel bound so leaves a launch record in mind's cache (runtime/cache.py): what torch's kernel
object read of it, as JSON values, with its cubin. A later process binds the kernel from it
(`recorded_launcher`) without compiling or asking Triton: no JIT specialization, no Triton cache
key (a hash of the kernel's source and what it calls) and no cache lookup, as Inductor binds
kernels from its own cache.

torch's `StaticallyLaunchedCudaKernel` reads the compiled kernel (as Inductor does); a kernel it
does not handle (ROCm, scratch memory, clusters, cooperative or PDL launches, TMA descriptors), or
a torch without it, launches through Triton's launcher.

The default: on an H200 (torch 2.11, Triton 3.6) the GPU tests pass with it, and a bf16 forward
of ResNet-18, Llama and GPT-2 (`benchmarks.models` sizes) took 1.06 / 1.43 / 0.79 ms against
1.61 / 1.63 / 1.52 ms through Triton's launcher, whose `cuLaunchKernelEx` path and per-launch
scratch allocation cost more. torch's launcher is a private API whose argument conventions
change between torch versions, so any failure to bind falls back to Triton's launcher, and
`MIND_STATIC_LAUNCHER=0` turns it off.
"""

from __future__ import annotations

import base64
import importlib
import json
import operator
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from mind.ir.logs import channel

log = channel("launch")

#: where torch keeps the class that reads a compiled kernel for its launcher (renamed in 2.12)
_MODULES = (
    "torch._inductor.runtime.static_triton_launcher",
    "torch._inductor.runtime.static_cuda_launcher",
)
#: launch attributes torch's launcher does not set
_ATTRIBUTES = ("launch_cooperative_grid", "launch_pdl")


def static_launcher(
    compiled: Any, device: torch.device, count: int, keep: Callable[[dict], None] | None = None
) -> Callable | None:
    """A launcher `fn(grid_x, grid_y, grid_z, stream, *args)` of `compiled` on `device` through
    torch's launcher, for launches that pass `count` arguments (the kernel's parameters before
    its constexprs); None where torch's launcher cannot launch it, or is not asked for. Once it
    is bound, `keep` is handed the kernel's record (`record`), where it has one."""
    if not enabled():
        return None
    try:
        kernel = read(compiled)
        kept = record(kernel) if keep else None  # (before loading: its cubin, no handle)
        launch = _bound(kernel, device, count)
    except Exception as exc:  # noqa: BLE001  (Triton's launcher is the fallback for any reason)
        log.debug("kernel %s: Triton's launcher (%s)", compiled.name, exc)
        return None
    if kept is not None:
        keep(kept)
    return launch


def recorded_launcher(name: str, kept: dict, device: torch.device, count: int) -> Callable | None:
    """`static_launcher` of kernel `name` from its record `kept`, made in another process: no
    Triton compiled kernel, JIT or cache is involved. None where it does not bind."""
    try:
        launch = _bound(restore(kept), device, count)
    except Exception as exc:  # noqa: BLE001  (the caller compiles the kernel instead)
        log.info("kernel %s: its launch record does not bind (%s): compiled", name, exc)
        return None
    return launch


def record(kernel: Any) -> dict | None:
    """What torch's launcher reads of a compiled kernel, as JSON values: torch's kernel object's
    state (its class pickles the same, as Inductor's cache stores it) and its cubin. None where
    the state holds something JSON does not (another torch's launcher)."""
    state = {name: value for name, value in vars(kernel).items() if name != "cubin_raw"}
    try:
        same = json.loads(json.dumps(state)) == state
    except (TypeError, ValueError):
        same = False
    if not same or not isinstance(kernel.cubin_raw, bytes):
        return None
    return {"state": state, "cubin": base64.b64encode(kernel.cubin_raw).decode()}


def restore(kept: dict) -> Any:
    """torch's kernel object from its `record`, as unpickling makes it (no code runs but
    torch's class, and its state is plain values)."""
    cls = _kernel_class()
    kernel = cls.__new__(cls)
    kernel.__dict__.update(kept["state"])
    kernel.cubin_raw = base64.b64decode(kept["cubin"], validate=True)
    return kernel


def _bound(kernel: Any, device: torch.device, count: int) -> Callable:
    """torch's launcher of `kernel`, loaded on `device`, for launches passing `count` arguments."""
    bound = arguments(kernel, count)
    if bound is None:  # not the arguments this module expects
        raise NotImplementedError(f"arguments {kernel.arg_tys}")
    _load(kernel, device)
    log.debug("kernel %s: torch's launcher, arguments %s", kernel.name, bound[0])
    return _launcher(kernel, *bound)


def enabled() -> bool:
    """Whether kernels launch through torch's launcher where it takes them: asked for (not
    `MIND_STATIC_LAUNCHER=0`) and this torch has one. Cheap: a compile worker asks it of every
    kernel, and reading a kernel as torch's launcher does would import part of Inductor (0.9 s
    in each worker)."""
    return os.environ.get("MIND_STATIC_LAUNCHER") != "0" and hasattr(
        torch._C, "_StaticCudaLauncher"
    )


def read(compiled: Any) -> Any:
    """torch's reading of `compiled` (Inductor's `StaticallyLaunchedCudaKernel`); it raises
    NotImplementedError for a kernel torch's launcher does not handle."""
    if torch.version.hip or any(getattr(compiled.metadata, a, False) for a in _ATTRIBUTES):
        raise NotImplementedError("ROCm or launch attributes")
    cls = _kernel_class()
    compiled._cubin_path = None  # the class reads it; `_load` writes the cubin
    return cls(compiled)


def arguments(kernel: Any, count: int) -> tuple[str, Callable[[tuple], tuple] | None] | None:
    """The cubin's argument types, and what of a launch's `count` arguments it takes (None: all
    of them, as they come); None when the two do not match."""
    constants = set(kernel.full_constexprs)
    kept = tuple(i for i in range(count) if i not in constants)
    flags = ("has_global_scratch", "has_profile_scratch")
    scratch = (None,) * sum(bool(getattr(kernel, flag, False)) for flag in flags)
    types = kernel.arg_tys + "O" * len(scratch)
    if len(kept) + len(scratch) != len(types):
        return None
    return types, _picker(kept, count, scratch)


def _load(kernel: Any, device: torch.device) -> None:
    """Load the kernel's cubin on `device` (torch unloads it when `kernel` is collected: the
    launcher keeps it)."""
    with tempfile.TemporaryDirectory() as folder, torch.cuda.device(device):
        kernel.reload_cubin_from_raw(str(Path(folder) / f"{kernel.name}.cubin"))
        kernel.load_kernel(torch.cuda.current_device())
    if kernel.function is None:
        raise RuntimeError("the cubin did not load")


def _kernel_class() -> type:
    for name in _MODULES:
        try:
            return importlib.import_module(name).StaticallyLaunchedCudaKernel
        except (ImportError, AttributeError):
            continue
    raise NotImplementedError("this torch has no static CUDA launcher")


def _picker(kept: tuple[int, ...], count: int, scratch: tuple) -> Callable[[tuple], tuple] | None:
    """What of a launch's arguments the cubin takes, as a tuple: None when it takes them all."""
    if kept == tuple(range(count)) and not scratch:
        return None
    if len(kept) > 1:
        pick = operator.itemgetter(*kept)
        return lambda args: pick(args) + scratch
    return lambda args: tuple(args[i] for i in kept) + scratch


def _launcher(kernel: Any, types: str, pick: Callable[[tuple], tuple] | None) -> Callable:
    launch_kernel = torch._C._StaticCudaLauncher._launch_kernel
    function, warps, shared = kernel.function, kernel.num_warps, kernel.shared

    if pick is None:

        def launch(gx: int, gy: int, gz: int, stream: int, *args) -> None:
            launch_kernel(function, gx, gy, gz, warps, shared, types, args, stream)

    else:

        def launch(gx: int, gy: int, gz: int, stream: int, *args) -> None:
            launch_kernel(function, gx, gy, gz, warps, shared, types, pick(args), stream)

    launch.kernel = kernel  # keeps the cubin loaded
    return launch
