"""Triton's standard library under the interpreter, in a process that also compiles for CUDA.

Triton 3.6 chooses between compiling and interpreting when `@triton.jit` runs: it reads
`triton.knobs.runtime.interpret` (`TRITON_INTERPRET`) at decoration time, neither at launch nor
once per process. That holds for the standard library too (`tl.sum`, `tl.max`, `tl.sigmoid`,
`tl.cdiv`, ...), decorated when `triton.language` is first imported: unless `TRITON_INTERPRET=1`
was set before that, they are compiled-mode `JITFunction`s, which an interpreted kernel cannot
call. So an interpreted launch swaps in interpreted twins of them (and of the `tl.tensor` methods
that forward to them) for its duration. Afterwards the language is put back exactly as it was:
the interpreter itself leaves `triton.language.core` patched with interpreter builtins whenever a
kernel calls another jit function (triton 3.6), which breaks every later CUDA compile.

The interpreter also truncates an f32 -> bf16 cast, where a compiled kernel (and torch) rounds to
nearest even, and writes an integer or f64 as bf16 bits: an interpreted launch converts to bf16
as torch does (`_round_to_bf16`), so CPU results are the GPU's.
Its atomics read a broadcast operand wrong; an interpreted launch passes them dense arrays."""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton import knobs
from triton.runtime.interpreter import InterpretedFunction, TensorHandle, interpreter_builder
from triton.runtime.jit import JITFunction

from .launch import DEBUG_OPTIONS

#: one interpreted launch at a time: the swap is process-wide
_LOCK = threading.RLock()
#: by id: hashing a JITFunction walks its dependencies, which fails mid-swap
_TWINS: dict[int, tuple[JITFunction, InterpretedFunction]] = {}


def _twin(fn: JITFunction) -> InterpretedFunction:
    if id(fn) not in _TWINS:
        _TWINS[id(fn)] = (fn, InterpretedFunction(fn.fn))
    return _TWINS[id(fn)][1]


def _method(twin: InterpretedFunction):
    """A `tl.tensor` method forwarding to `twin` (`x.sum(0)` is `tl.sum(x, 0)`)."""
    return lambda *args, **kwargs: twin(*args, **kwargs)


def _owners() -> list[object]:
    """What the interpreter patches: every loaded `triton.language` module, and the classes."""
    return [
        *_language_modules(len(sys.modules)),
        tl.tensor,
        tl.dtype,
        tl.core.tensor_descriptor_base,
    ]


@functools.lru_cache(maxsize=1)
def _language_modules(count: int) -> tuple[types.ModuleType, ...]:
    """The loaded `triton.language` modules, found again only when the number of loaded modules
    (`count`) changed: scanning `sys.modules` at each interpreted call took half of a graph's
    fixed cost on CPU (a graph of one mm: 0.48 ms a call, 0.26 ms without the scan)."""
    names = [
        n for n in list(sys.modules) if n == "triton.language" or n.startswith("triton.language.")
    ]
    return tuple(m for m in map(sys.modules.get, names) if isinstance(m, types.ModuleType))


def _restore(saved: dict[object, dict[str, object]]) -> None:
    """Put back every attribute that changed. Classes also lose what was added; modules keep it
    (the interpreter adds helpers to the globals of the functions it rewrites, and reuses them)."""
    for owner, attrs in saved.items():
        current = dict(vars(owner))
        for name, value in attrs.items():
            if current.get(name, attrs) is not value:
                setattr(owner, name, value)
        if isinstance(owner, type):
            for name in current.keys() - attrs.keys():
                delattr(owner, name)


def _checked_options(options):
    """Interpreter options that check device asserts as a compiled kernel that asserts does
    (`DEBUG_OPTIONS`); the interpreter has one set of options for every kernel."""
    names = {f.name for f in dataclasses.fields(options)}
    return dataclasses.replace(options, **{k: v for k, v in DEBUG_OPTIONS.items() if k in names})


def _round_to_bf16(cast):
    """`cast` (the interpreter builder's), with a cast to bf16 made as torch and compiled Triton
    make it: the value in f32 first (the interpreter wrote an integer's or an f64's value as the
    bits of a bf16: `(x != 0).to(bf16)` was 9e-41), then rounded to nearest even; NaN stays NaN
    (quiet), and a carry past the largest finite value gives inf."""

    def rounding_cast(src, dst_type, *rest):
        if dst_type.scalar != tl.bfloat16 or src.dtype.scalar == tl.bfloat16:
            return cast(src, dst_type, *rest)
        if src.dtype.scalar != tl.float32:
            with np.errstate(over="ignore"):  # past f32's range is inf, as torch makes it
                src = interpreter_builder.cast_impl(src, tl.float32)
        bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> 16
        quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x40)
        data = np.where(np.isnan(src.data), quiet_nan, rounded).astype(np.uint16)
        return TensorHandle(data, tl.bfloat16)

    return rounding_cast


#: the builder's casts that may make a bf16 (from f32, `x.to(tl.bfloat16)` is an fp_trunc)
_CASTS = ("create_fp_trunc", "create_fp_to_fp", "create_si_to_fp", "create_ui_to_fp")


def _dense_operands(rmw):
    """`rmw` (the builder's atomic), given dense arrays: the interpreter's native atomic reads
    its operands as contiguous, so a broadcast value (`tl.broadcast_to`, a stride-0 view) lost
    all but some of its adds (`ones_like(x).index_add(...)`)."""

    def dense_rmw(op, *handles_and_rest):
        dense = [
            TensorHandle(np.ascontiguousarray(h.data), h.dtype)
            if isinstance(h, TensorHandle)
            else h
            for h in handles_and_rest
        ]
        return rmw(op, *dense)

    return dense_rmw


@contextmanager
def interpreted_language() -> Iterator[None]:
    """Triton's language as the interpreter needs it, for the duration of the block."""
    with _LOCK, knobs.runtime.scope():
        knobs.runtime.interpret = True
        saved = {owner: dict(vars(owner)) for owner in _owners()}
        own = dict(vars(interpreter_builder))  # the builder's options and casts, put back after
        interpreter_builder.options = _checked_options(interpreter_builder.options)
        for name in (n for n in _CASTS if hasattr(interpreter_builder, n)):
            setattr(interpreter_builder, name, _round_to_bf16(getattr(interpreter_builder, name)))
        rmw = interpreter_builder.create_atomic_rmw
        interpreter_builder.create_atomic_rmw = _dense_operands(rmw)
        try:
            for owner in saved:
                for name, value in saved[owner].items():
                    if isinstance(value, JITFunction):
                        twin = _twin(value)
                        setattr(owner, name, _method(twin) if owner is tl.tensor else twin)
            yield
        finally:
            vars(interpreter_builder).clear()
            vars(interpreter_builder).update(own)
            _restore(saved)


def run_interpreted(module: types.ModuleType) -> None:
    """Make `module.call` launch its kernels with the interpreted standard library."""
    call = module.call

    @functools.wraps(call)
    def interpreted_call(args):
        with interpreted_language():
            return call(args)

    module.call = interpreted_call
