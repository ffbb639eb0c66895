"""A compiled graph as the backend hands it to AOTAutograd: `MindCode`, the generated module's
`call` wrapped as AOTAutograd needs it (boxed, never traced by Dynamo, checked on its first
call, recorded as CUDA graphs when asked), with what it takes to wrap it again elsewhere.

AOTAutograd stores a `MindCode` in its own cache (AOTAutogradCache), as it stores Inductor's
compiled graphs. A new process that compiles the same Dynamo graph loads the entry instead of
tracing, and `post_compile` reads the module back from mind's cache, checked against its key
(runtime/cache.py): a module missing or damaged makes the entry unusable, and the graph is
compiled again. A graph that runs eagerly is never stored: each process says why again."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import torch
import torch._dynamo
from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
from torch._functorch.aot_autograd import make_boxed_func
from torch._inductor.output_code import OutputCode
from torch.utils._python_dispatch import _disable_current_modes

from mind import runtime
from mind.dump import GraphDump
from mind.fallback import fall_back
from mind.ir.context import bound
from mind.ir.logs import channel
from mind.options import Options
from mind.runtime.cudagraphs import CudaGraphs

log = channel("output_code")

#: the name of the Dynamo graph being compiled: graphs loaded from the cache are named for it
#: (a name says in which order this process compiled them, not what they compute)
_GRAPH: ContextVar[str] = ContextVar("mind_graph", default="graph")


@contextlib.contextmanager
def compiling(name: str) -> Iterator[None]:
    """Name what AOTAutograd compiles or loads for Dynamo graph `name`."""
    with bound(_GRAPH, name):
        yield


@dataclasses.dataclass
class Recording:
    """What recording a graph's launches as CUDA graphs needs to know of the graph."""

    #: inputs AOTAutograd marks static (parameters, buffers): read in place by a replay
    static_inputs: frozenset[int] = frozenset()
    #: inputs whose sizes or strides are symbolic, or that are integers: a recording each
    symbolic_inputs: tuple[int, ...] = ()
    #: why the graph cannot be recorded, if it cannot
    unrecordable: str | None = None
    #: 0-d CPU tensor inputs, read by value: a recording each value
    scalar_inputs: tuple[int, ...] = ()
    #: inputs the graph overwrites: a replay that copied one in copies it back
    overwritten_inputs: tuple[int, ...] = ()


@dataclasses.dataclass
class MindCode(OutputCode):
    """One compiled ATen graph (a forward, a backward or an inference graph), callable with
    AOTAutograd's boxed argument list."""

    #: the generated module's key in mind's cache; None when the graph runs eagerly
    module_key: str | None
    interpret: bool
    options: Options
    #: what recording it as CUDA graphs needs, when the options ask for it and it runs on a GPU
    recording: Recording | None
    #: the ATen graph, to run eagerly if the first call fails: live, or saved for the cache
    aten: torch.fx.GraphModule | SavedGraph
    #: why AOTAutograd must not store it, if it must not
    uncacheable: str | None = None

    def __post_init__(self) -> None:
        self._boxed_call = True
        self._call: Callable[[list], object] | None = None

    @classmethod
    def compiled(
        cls, call: Callable[[list], object], module_key: str, symbol: str, dump: GraphDump, **kw
    ) -> MindCode:
        code = cls(module_key, **kw)
        code._call = code._wrap(call, symbol, dump)
        return code

    @classmethod
    def eager(cls, symbol: str, exc: BaseException, dump: GraphDump, **kw) -> MindCode:
        code = cls(None, **kw)
        code._call = run_eagerly(code.aten, symbol, exc, dump)
        return code

    @classmethod
    def split(cls, call: Callable[[list], object], **kw) -> MindCode:
        """A graph run as parts: compiled ones, each checked on its own, and ops torch runs
        (mind/higher_order.py)."""
        code = cls(None, **kw)
        code._call = call
        return code

    @torch._dynamo.disable
    def __call__(self, args: list) -> object:
        """Never traced by Dynamo: a backward runs inside `loss.backward()`, which may be called
        in a frame Dynamo traces (a compiled training step). Of that call's frames, this is the
        first outside torch (whose files Dynamo skips): Dynamo started tracing here when only
        the call inside was disabled, and broke a graph at it (Inductor's graphs gave none)."""
        return self._call(args)

    def prepare_for_serialization(self) -> None:
        """Called on the copy AOTAutograd stores: the module is referred to by its key, the
        ATen graph kept as code. An eager graph is not stored."""
        if self.uncacheable is not None:
            raise BypassAOTAutogradCache(f"mind: {self.uncacheable}")
        if self.module_key is None:
            raise BypassAOTAutogradCache("mind: the graph runs eagerly")
        if isinstance(self.aten, torch.fx.GraphModule):
            self.aten = SavedGraph.of(self.aten)
        self._call = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        """Loaded from AOTAutograd's cache in a new process: import the module from mind's
        cache and wrap its `call`; an exception makes AOTAutograd compile the graph anew."""
        symbol = f"{_GRAPH.get()}_{'backward' if graph_kwargs.get('is_backward') else 'forward'}"
        source = runtime.cached_module(self.module_key, self.interpret)
        if source is None:
            raise LookupError(f"mind: module {self.module_key[:16]} missing or damaged")
        log.info("graph %s (from AOTAutograd's cache):\n%s", symbol, source)
        program = runtime.load(source, symbol, f"{symbol}.triton", interpret=self.interpret)
        self._call = self._wrap(program.call, symbol, GraphDump(symbol))

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        """Triton's own cache keeps the kernels."""

    def _wrap(self, call: Callable[[list], object], symbol: str, dump: GraphDump) -> Callable:
        call = FirstCallCheck(
            call, self._aten_module, symbol, dump, output_strides(call), self.interpret
        )
        if self.recording is not None:
            call = recorded(call, symbol, self.options, self.recording)
        return call

    def _aten_module(self) -> torch.fx.GraphModule:
        if isinstance(self.aten, SavedGraph):
            self.aten = self.aten.load()
        return self.aten


@dataclasses.dataclass(frozen=True)
class SavedGraph:
    """An ATen graph as bytes of `torch.save`: its code, and its tensor constants (a lifted
    `torch.tensor([...])`) with their devices. AOTAutograd's cache pickles its entry under the
    compile's fake mode in torch 2.11, where pickling a GPU tensor fails ("Please convert all
    Tensors to FakeTensors"), and the graph was never stored; saved here, the entry holds no
    tensor."""

    data: bytes

    @classmethod
    def of(cls, graph: torch.fx.GraphModule) -> SavedGraph:
        buffer = io.BytesIO()
        with _disable_current_modes():
            torch.save(graph, buffer)
        return cls(buffer.getvalue())

    def load(self) -> torch.fx.GraphModule:
        """The graph again, its constants on their devices: bytes of mind's own making, from the
        entry AOTAutograd's cache checked and unpickled."""
        return torch.load(io.BytesIO(self.data), weights_only=False)


def output_strides(call: Callable) -> tuple:
    """What a generated module's `call` says of its outputs' strides (target/wrapper.py); a
    module written otherwise says nothing."""
    return getattr(call, "output_strides", ())


def timed(compile_fn: Callable[..., MindCode]) -> Callable[..., MindCode]:
    """`compile_fn`, its result marked with how long it took (AOTAutograd's cache records it)."""

    def run(*args, **kwargs) -> MindCode:
        start = time.time_ns()
        code = compile_fn(*args, **kwargs)
        code._time_taken_ns = time.time_ns() - start
        return code

    return run


def run_eagerly(aot_gm: torch.fx.GraphModule, symbol: str, exc: BaseException, dump: GraphDump):
    """AOTAutograd's own ATen graph, boxed, after warning once why."""
    fall_back(symbol, exc, dump.reproducer())
    return eager_call(aot_gm)


def eager_call(aot_gm: torch.fx.GraphModule) -> Callable[[list], object]:
    """AOTAutograd's own ATen graph, boxed."""
    return make_boxed_func(aot_gm.forward)


class FirstCallCheck:
    """Runs the generated `call`; if its first call fails (Triton compiles at first launch), the
    graph falls back to eager for good, its outputs laid out as the compiled graph reported them
    (`output_strides`: a backward may have been compiled for them). A kernel's failed check
    (`CheckFailed`, at any call of interpreted kernels: on a GPU a failed device assert ends the
    process) is no fault of the graph: that call runs eagerly, which raises eager's own error,
    and the graph stays compiled. The generated call takes its argument list (it clears it), so
    a call that may have to run again eagerly gets a copy: the first, and every interpreted one."""

    def __init__(
        self,
        call: Callable[[list], object],
        aten: Callable[[], torch.fx.GraphModule],
        symbol: str,
        dump: GraphDump,
        output_strides: tuple = (),
        interpreted: bool = False,
    ):
        self.call, self.aten, self.symbol, self.dump = call, aten, symbol, dump
        self.output_strides = output_strides
        self.interpreted = interpreted
        self.checked = False

    def __call__(self, args: list) -> object:
        try:
            out = self.call(args if self.checked and not self.interpreted else list(args))
        except runtime.CheckFailed:
            return laid_out(eager_call(self.aten()), self.output_strides)(args)
        except Exception as exc:
            if self.checked:
                raise
            eager = run_eagerly(self.aten(), self.symbol, exc, self.dump)
            self.call = laid_out(eager, self.output_strides)
            out = self.call(args)
        self.checked = True
        return out


def laid_out(call: Callable[[list], object], strides: tuple) -> Callable[[list], object]:
    """`call` whose tensor outputs are copied into `strides` (None: as they come) where it lays
    them out otherwise, in a dim longer than 1."""
    if all(s is None for s in strides):
        return call

    def run(args: list) -> object:
        outs = call(args)
        return type(outs)(_strided(out, s) for out, s in zip(outs, strides))

    return run


def _strided(out: object, strides: tuple[int, ...] | None) -> object:
    if not isinstance(out, torch.Tensor) or strides is None:
        return out
    if all(n == 1 or a == b for n, a, b in zip(out.shape, out.stride(), strides)):
        return out
    return torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device).copy_(out)


def recorded(
    call: Callable[[list], object], symbol: str, options: Options, recording: Recording
) -> Callable:
    """`call` under CUDA graphs, unless the graph holds what a recording cannot."""
    runner = CudaGraphs(
        call,
        symbol,
        set(recording.static_inputs),
        _shape_key(recording.symbolic_inputs, recording.scalar_inputs),
        options.cudagraph_max_shapes,
        options.cudagraph_max_recordings,
        set(recording.overwritten_inputs),
    )
    if recording.unrecordable is not None:
        runner.disable(recording.unrecordable)
    return runner


def _shape_key(symbolic: tuple[int, ...], scalars: tuple[int, ...] = ()) -> Callable:
    """What tells calls that need recordings of their own apart: nothing for static sizes
    (Dynamo guards them), else the sizes and strides of the inputs with symbols and the integer
    inputs; and the values of 0-d CPU tensors, which a recording holds as it saw them."""
    if not symbolic and not scalars:
        return lambda args: None
    return lambda args: (
        tuple(
            (a.shape, a.stride()) if isinstance(a, torch.Tensor) else a
            for a in (args[i] for i in symbolic)
        )
        + tuple(args[i].item() for i in scalars)
    )
