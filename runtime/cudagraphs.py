"""CUDA graphs for compiled graphs (`mode="reduce-overhead"`, `options={"cudagraphs": True}`).

A compiled graph's call runs once as a warm-up, then is recorded with torch's own machinery
(`torch.cuda.CUDAGraph` into a private memory pool) and replayed: one replay instead of every
launch, allocation and ATen call of the wrapper.

Inputs: parameters, buffers and tensors that live in memory that stays put (a recording's
outputs, such as the activations a forward saved for its backward, and the storage of an input
some recording bound, such as the transposed weight a backward reads, a view of a parameter)
are read where they are, so the recording is bound to their addresses (and holds no reference
to them: it replays only for callers that pass tensors at those addresses); every other input
is copied into storage the recording owns before each replay, all in one `_foreach_copy_` (and
back after it, where the graph overwrites the input). A call whose bound inputs moved uses
another recording of the same shape, or records one. A 0-d CPU tensor is read by value
(kernels take it as a scalar argument), so a recording holds the value it was recorded with: the
caller keys recordings by those values as by shapes (mind/compiled.py).

Outputs, the rule: an output a caller still holds is never overwritten. Each replay hands out
the same tensors, those the capture wrote (so a call makes and frees no tensor per output, as
Inductor's cudagraph trees reuse theirs); while a caller holds any of them, or a view or alias of
one (a gradient autograd stored, an activation saved for the backward), that recording is busy,
and a call replays another recording of the same shape, recording one if there are fewer than
`max_recordings`. Holding the outputs of several calls at once therefore costs the memory of
several recordings, and holding more than `max_recordings` at once runs that call without CUDA
graphs. An output that is an input (or a view of one) is that input.

Memory: each recording has a pool of its own and keeps what it wrote, so a backward's recording
does not reuse the memory of the activations its forward saved, as Inductor's trees do (their
outputs die once read, and touching one after is an error). One pool for all recordings would
save little of that (20-34 MiB of 160-175 on three H200 training steps), and would let a
recording replay only while none captured after it in the pool is busy.

What cannot be recorded runs as compiled, without CUDA graphs: CPU tensors with dims, host
syncs and data-dependent shapes (refused before recording, or by a failed capture), and input
shapes past `max_shapes`.
"""

from __future__ import annotations

import operator
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from mind.ir.logs import channel
from torch._dynamo.utils import counters
from torch.multiprocessing.reductions import StorageWeakRef

from .launch import reinterpret_tensor
from .user_line import warn_at_user

log = channel("cudagraphs")


def count(outcome: str) -> None:
    """How a call went (replay, record, warm-up, unrecorded: why), counted in Dynamo's
    `counters["mind_cudagraphs"]` for benchmarks and tests (looked up each time: a reset of the
    counters replaces the entry)."""
    counters["mind_cudagraphs"][outcome] += 1


Call = Callable[[list], Sequence]

#: storages whose address stays put, by data pointer: every recording's outputs, and the
#: storages of the inputs recordings bound (parameters, buffers, and views of them); held weakly,
#: so that memory freed and handed to another tensor at the same address does not count
_STAY_PUT: dict[int, StorageWeakRef] = {}


def _stays_put(t: torch.Tensor) -> bool:
    ref = _STAY_PUT.get(t.untyped_storage().data_ptr())
    return ref is not None and not ref.expired()


def _stay_put(tensors: list[torch.Tensor]) -> None:
    """Record `tensors`' storages, and forget the freed ones: a recording is rare and costs far
    more than a pass over the storages alive, so the record stays as small as they are."""
    for ptr in [p for p, ref in _STAY_PUT.items() if ref.expired()]:
        del _STAY_PUT[ptr]
    for t in tensors:
        storage = t.untyped_storage()
        _STAY_PUT[storage.data_ptr()] = StorageWeakRef(storage)


class MindCudaGraphWarning(UserWarning):
    """A compiled graph runs without CUDA graphs although they were asked for."""


def _extent(t: torch.Tensor) -> int:
    return 0 if 0 in t.shape else 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The memory `t` spans, as a 1-d tensor: copying it copies `t` whatever its layout."""
    return reinterpret_tensor(t, (_extent(t),), (1,), 0)


@dataclass
class Recording:
    """One captured call: the graph, the arguments it reads, the outputs it writes."""

    graph: torch.cuda.CUDAGraph
    #: the memory of the static copies of the copied inputs the capture read
    targets: list[torch.Tensor]
    copied: list[int]
    #: of `copied`, the positions of the inputs the graph overwrites: copied back after a replay
    written: list[int]
    #: per input, the data pointer the recording is bound to (None where it copies)
    pointers: list[int | None]
    bound: list[int]
    #: per output: ("out", value), a tensor the recording writes (or a value that is no
    #: tensor), or ("input", index, size, stride, offset), a view of an input
    outputs: list[tuple]
    #: the tensors the recording writes: every replay hands out these same tensors, so that no
    #: tensor is made (or freed) per output and call (Inductor's cudagraph trees do the same)
    tensors: list[torch.Tensor] = field(default_factory=list)
    storages: list[StorageWeakRef] = field(default_factory=list)
    #: what holds `tensors` and their storages while no caller does (`_holders`)
    baseline: list[int] = field(default_factory=list)

    def settle(self) -> None:
        """Take the recording's output tensors as its own, once the capture let go of them:
        torch is told that the recording holds a reference to each (`_add_cached_tensor`), so
        that autograd still takes a gradient over without a copy, and what holds them now is
        the baseline `busy` compares with."""
        self.tensors = [
            spec[1]
            for spec in self.outputs
            if spec[0] == "out" and isinstance(spec[1], torch.Tensor)
        ]
        self.storages = [StorageWeakRef(t.untyped_storage()) for t in self.tensors]
        _cache(self.tensors)
        weakref.finalize(self, _uncache, list(self.tensors))
        self.baseline = self._holders()  # (no name here may hold a tensor: it would count)

    def _holders(self) -> list[int]:
        """References to each output tensor (Python's and C++'s), and to each one's storage
        (a view, an alias autograd made of it)."""
        tensors = [sys.getrefcount(t) + t._use_count() for t in self.tensors]
        return tensors + [torch._C._storage_Use_Count(ref.cdata) for ref in self.storages]

    def busy(self) -> bool:
        """Whether a caller still holds an output (or a view of one) of the last replay."""
        return any(map(operator.gt, self._holders(), self.baseline))

    def matches(self, args: list) -> bool:
        return torch._C._tensors_data_ptrs_at_indices_equal(args, self.pointers, self.bound)

    def replay(self, args: list) -> list:
        if self.copied:
            # the inputs' layouts are the recording's (guarded): each spans its target's length
            sources = [
                reinterpret_tensor(args[i], t.shape, (1,), 0)
                for i, t in zip(self.copied, self.targets)
            ]
            torch._foreach_copy_(self.targets, sources)
        self.graph.replay()
        if self.written:  # the inputs the graph overwrote, back where the caller has them
            torch._foreach_copy_(
                [sources[k] for k in self.written], [self.targets[k] for k in self.written]
            )
        for t in self.tensors:  # a hook a caller left on a tensor it dropped goes with it
            if t._backward_hooks is not None:
                t._backward_hooks = None
        return [_output(spec, args) for spec in self.outputs]


def _output(spec: tuple, args: list):
    if spec[0] == "out":
        return spec[1]
    _, index, size, stride, offset = spec
    return reinterpret_tensor(args[index], size, stride, offset)


def _cache(tensors: list[torch.Tensor]) -> None:
    torch._C._set_cached_tensors_enabled(True)
    for t in tensors:
        torch._C._add_cached_tensor(t)


def _uncache(tensors: list[torch.Tensor]) -> None:
    """Drop what `Recording.settle` told torch. Inductor's reset turns torch's record of cached
    tensors off for the process (and removing one then fails): turned on again."""
    torch._C._set_cached_tensors_enabled(True)
    for t in tensors:
        torch._C._remove_cached_tensor(t)


class CudaGraphs:
    """Replaces a compiled graph's `call(args)`: records per input shape, replays."""

    def __init__(
        self,
        call: Call,
        name: str,
        static_inputs: set[int],
        shape_key: Callable[[list], object],
        max_shapes: int,
        max_recordings: int,
        overwritten: set[int] = frozenset(),
    ):
        self.call, self.name = call, name
        self.static_inputs = static_inputs
        self.overwritten = overwritten
        self.shape_key = shape_key
        self.max_shapes, self.max_recordings = max_shapes, max_recordings
        self.recordings: dict[object, list[Recording]] = {}
        self.disabled: str | None = None

    def __call__(self, args: list) -> Sequence:
        if self.disabled is not None:
            count("unrecorded: disabled")
            return self.call(args)
        key = self.shape_key(args)
        recordings = self.recordings.get(key)
        if recordings is None:  # a new shape: warm up (allocators, cuBLAS) before recording
            if len(self.recordings) >= self.max_shapes:
                log.debug("%s: unrecorded, past %d shapes", self.name, self.max_shapes)
                count("unrecorded: past max shapes")
                return self.call(args)
            log.info("%s: warm-up of shape %d %s", self.name, len(self.recordings), key or "")
            count("warm-up")
            self.recordings[key] = []
            return self.call(args)
        for recording in recordings:
            if not recording.busy() and recording.matches(args):
                count("replay")
                return recording.replay(args)
        if len(recordings) >= self.max_recordings:
            log.debug(
                "%s: unrecorded, %d recordings busy or bound elsewhere", self.name, len(recordings)
            )
            busy = any(r.busy() for r in recordings)
            count("unrecorded: outputs held" if busy else "unrecorded: inputs moved")
            return self.call(args)
        log.info("%s: recording %d of this shape", self.name, len(recordings))
        return self.record(recordings, args)

    def disable(self, reason: str) -> None:
        self.disabled = reason
        count("unrecorded: disabled")
        log.info("%s: no CUDA graphs: %s", self.name, reason)
        warn_at_user(
            f"mind: graph '{self.name}' runs without CUDA graphs: {reason}", MindCudaGraphWarning
        )

    def record(self, recordings: list[Recording], args: list) -> Sequence:
        reason = _unrecordable(args)
        if reason is not None:
            self.disable(reason)
            return self.call(args)
        bound = [i for i, a in enumerate(args) if self._binds(i, a)]
        copied = [
            i
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and i not in bound and not is_cpu_scalar(a)
        ]
        captured = list(args)
        for i in copied:
            captured[i] = torch.empty_strided(
                args[i].shape, args[i].stride(), dtype=args[i].dtype, device=args[i].device
            )
            _flat(captured[i]).copy_(_flat(args[i]))
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
                outputs = list(self.call(list(captured)))
        except Exception as exc:  # a sync or a host read that capture refuses
            self.disable(f"capture failed: {type(exc).__name__}: {exc}")
            return self.call(args)
        pointers = [args[i].data_ptr() if i in bound else None for i in range(len(args))]
        specs = [_output_spec(out, captured) for out in outputs]
        targets = [_flat(captured[i]) for i in copied]
        written = [k for k, i in enumerate(copied) if i in self.overwritten]
        recording = Recording(graph, targets, copied, written, pointers, bound, specs)
        del outputs
        recording.settle()
        _stay_put(recording.tensors + [args[i] for i in bound])
        recordings.append(recording)
        count("record")
        return recording.replay(args)

    def _binds(self, index: int, arg) -> bool:
        """Whether the recording reads input `index` where it is rather than from a copy."""
        if not isinstance(arg, torch.Tensor):
            return False
        return index in self.static_inputs or isinstance(arg, torch.nn.Parameter) or _stays_put(arg)


def _output_spec(out, captured: list) -> tuple:
    """How a replay returns this output: the tensor the capture wrote, or a view of the input
    it aliases (the caller's own tensor, not the recording's copy of it)."""
    if not isinstance(out, torch.Tensor):
        return ("out", out)
    storage = out.untyped_storage().data_ptr()
    for i, arg in enumerate(captured):
        if isinstance(arg, torch.Tensor) and arg.untyped_storage().data_ptr() == storage:
            offset = out.storage_offset() - arg.storage_offset()
            return ("input", i, tuple(out.shape), tuple(out.stride()), offset)
    return ("out", out)


def is_cpu_scalar(arg) -> bool:
    """A 0-d CPU tensor: kernels read it by value, so a recording holds the value it saw."""
    return isinstance(arg, torch.Tensor) and arg.device.type == "cpu" and arg.dim() == 0


def _unrecordable(args: list) -> str | None:
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.device.type != "cuda" and not is_cpu_scalar(arg):
            return f"an input is on {arg.device}"
    return None
