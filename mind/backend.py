"""`torch.compile(fn, backend="mind")`: each Dynamo graph goes fx -> aten (AOTAutograd: inference,
or forward and backward) -> loops -> scheduled -> triton -> Python source -> the runtime.

Nothing a user writes may crash compilation: a graph that fails at any step, including the first
call of its compiled code, runs eagerly instead, and one `MindFallbackWarning` says why and where
the reproducer IR is. A bad `mode` or `options` is the caller's error, not a graph's: it raises.

With CUDA graphs (`mode="reduce-overhead"`), each compiled graph on the GPU is recorded and
replayed (mind.runtime.cudagraphs); parameters and buffers, which AOTAutograd names, are read in
place, so a replay copies only the other inputs."""

from __future__ import annotations

import functools
import itertools
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
from torch._functorch.aot_autograd import make_boxed_func

from mind import runtime, tuning
from mind.dialects import aten, fx
from mind.dialects.collectives import is_collective
from mind.dump import GraphDump
from mind.fallback import DYNAMO_CONTROL_FLOW
from mind.frontend import dynamo_guards
from mind.ir.core import Module, Operation
from mind.ir.diagnostics import user_stacklevel
from mind.ir.logs import channel
from mind.ir.types import SymType, TensorType
from mind.options import Options, pipeline_of, resolve_options
from mind.progress import progress
from mind.runtime import compile_pool
from mind.runtime.cudagraphs import CudaGraphs

_GRAPH_NAMES = (f"graph{i}" for i in itertools.count())
log = channel("output_code")


class MindFallbackWarning(UserWarning):
    """A graph runs eagerly because mind could not compile it."""


def fall_back(graph: str, exc: BaseException, reproducer: Path | None) -> None:
    """Warn once that `graph` runs eagerly, at the user's line that compiled or called it."""
    where = f"reproducer IR: {reproducer}" if reproducer else "no IR was produced"
    warnings.warn(
        f"mind: graph '{graph}' runs eagerly: {type(exc).__name__}: {exc} ({where})",
        MindFallbackWarning,
        stacklevel=user_stacklevel(),
    )


def mind_backend(
    gm: torch.fx.GraphModule,
    example_inputs: list,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable:
    """The Dynamo backend: AOTAutograd over mind-compiled ATen graphs, or `gm` itself if even
    capture fails. `mode` and `options` are torch.compile's (see mind.options)."""
    opts = resolve_options(mode, options)
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs):
        compile_pool.start()  # its workers start while Dynamo, AOTAutograd and the passes run
    name = next(_GRAPH_NAMES)
    dump = GraphDump(name)
    try:
        dump.stage("fx", Module([fx.import_graph(gm, name, dynamo_guards())]))
        from mind.passes.to_aten import aten_graphs  # loads every pass: a broken one falls back

        compile_graph = functools.partial(compile_aten_graph, options=opts)
        compiled, _ = aten_graphs(gm, example_inputs, name, compile_graph=compile_graph)
    except DYNAMO_CONTROL_FLOW:
        raise
    except Exception as exc:
        fall_back(name, exc, dump.reproducer())
        return gm.forward
    return compiled


def boxed(fn: Callable[[list], object]) -> Callable[[list], object]:
    """`fn` as AOTAutograd calls it (with the argument list), never traced by Dynamo: the backward
    runs from inside user code (`loss.backward()`) that Dynamo may be tracing."""
    run = torch._dynamo.disable(fn, recursive=True)
    run._boxed_call = True
    return run


@torch._dynamo.disable(recursive=True)
def compile_aten_graph(
    aot_gm: torch.fx.GraphModule, symbol: str, options: Options | None = None
) -> Callable:
    """AOTAutograd's ATen graph as a boxed callable: its generated Triton program, or the graph
    itself. Not traced by Dynamo: AOTAutograd compiles the backward lazily, inside
    `loss.backward()`."""
    options = options or Options()
    dump = GraphDump(symbol)
    try:
        graph = aten.import_graph(aot_gm, symbol)
        if options.autotune:
            tuning.install()
        deterministic = torch.are_deterministic_algorithms_enabled()
        program = load_program(graph, dump, pipeline_of(options, deterministic))
    except Exception as exc:
        return eager(aot_gm, symbol, exc, dump)
    call = FirstCallCheck(program.call, aot_gm, symbol, dump)
    if options.cudagraphs and _interpret(graph) is None:
        call = recorded(call, graph, options)
    return boxed(call)


def load_program(graph: Operation, dump: GraphDump, pipeline: str):
    """The generated module for `graph`: from the graph cache when an earlier process compiled
    the same graph with the same pipeline (no pass runs), else generated and remembered. Dumping
    (`MIND_DUMP_DIR`) always runs the passes, to write every stage. A terminal shows progress."""
    from mind.passes import parse_pipeline, resolve_pipeline

    interpret = _interpret(graph)
    interpret = runtime.default_interpret() if interpret is None else interpret
    key = None if dump.directory else runtime.graph_key(_anonymous(graph), pipeline, interpret)
    cached = runtime.cached_graph(key, interpret) if key else None
    passes = resolve_pipeline(parse_pipeline(pipeline), "aten") if cached is None else []
    with progress(graph.symbol, len(passes) + 1) as done:
        source = cached if cached is not None else generate(graph, dump, passes, done)
        made = "generated" if cached is None else "from the graph cache"
        log.info("graph %s (%s):\n%s", graph.symbol, made, source)
        origin = dump.file("triton") or f"{graph.symbol}.triton"
        program = runtime.load(source, graph.symbol, str(origin), interpret=interpret)
        done("kernels compiled")
    if key and cached is None:
        runtime.remember_graph(key, source, interpret)
    return program


def _anonymous(graph: Operation) -> str:
    """The graph's IR text without its name (`graph3_forward` says nothing of what it computes,
    and the generated module does not depend on it)."""
    name, graph.symbol = graph.symbol, "graph"
    try:
        return str(Module([graph]))
    finally:
        graph.symbol = name


def generate(
    graph: Operation, dump: GraphDump, passes: list, done: Callable[[str], None] = lambda what: None
) -> str:
    """The Python source (Triton kernels and `call`) for an `aten.graph`, each stage dumped;
    `done` hears of each pass."""
    from mind.passes import PassManager
    from mind.target.triton import emit

    def after(p, module: Module) -> None:
        dump.after_pass(p, module)
        done(p.name)

    dump.stage("aten", Module([graph]))
    source = emit(PassManager(passes, on_pass=after).run(Module([graph])))
    dump.write("py", source)
    return source


def recorded(call: Callable[[list], object], graph: Operation, options: Options) -> Callable:
    """`call` under CUDA graphs, unless the graph holds what a recording cannot."""
    runner = CudaGraphs(
        call,
        graph.symbol,
        _static_inputs(graph),
        _shape_key(graph),
        options.cudagraph_max_shapes,
        options.cudagraph_max_recordings,
    )
    reason = _unrecordable(graph)
    if reason is not None:
        runner.disable(reason)
    return runner


def _static_inputs(graph: Operation) -> set[int]:
    """The inputs AOTAutograd marks static (parameters, buffers) for a forward graph."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None or graph.symbol.endswith("_backward"):
        return set()
    return set(getattr(meta, "static_input_indices", None) or ())


def _shape_key(graph: Operation) -> Callable[[list], object]:
    """What tells the input shapes of a call apart: nothing for static sizes (Dynamo guards
    them), else the sizes and strides of the inputs with symbols and the integer inputs."""
    symbolic = [
        i
        for i, arg in enumerate(graph.body.args)
        if isinstance(arg.type, SymType)
        or (isinstance(arg.type, TensorType) and not _static_type(arg.type))
    ]
    if not symbolic:
        return lambda args: None
    return lambda args: tuple(
        (a.shape, a.stride()) if isinstance(a, torch.Tensor) else a
        for a in (args[i] for i in symbolic)
    )


def _static_type(t: TensorType) -> bool:
    return all(isinstance(s, int) for s in (*t.shape, *(t.strides or ())))


#: op tags that make a recording wrong: a host sync, or an output shape that depends on data
#: (collectives are not recorded either)
_UNRECORDABLE_TAGS = ("data_dependent_output", "dynamic_output_shape", "cudagraph_unsafe")


def _unrecordable(graph: Operation) -> str | None:
    """Why the graph cannot be recorded (a CPU tensor, a host sync, a data-dependent shape)."""
    tags = {getattr(torch.Tag, t) for t in _UNRECORDABLE_TAGS if hasattr(torch.Tag, t)}
    for op in graph.walk():
        for value in [*op.results, *(op.body.args if op.regions else [])]:
            device = getattr(value.type, "device", None)
            if device is not None and device.type != "cuda":
                return f"'%{value.name}' is on {device}"
        if is_collective(op):
            return f"'{op.name}' is a collective"
        target = aten.overload(op.name) if op.name.startswith("aten.") else None
        if target is not None and tags & set(target.tags):
            return f"'{op.name}' syncs with the host or has a data-dependent shape"
    return None


def eager(aot_gm: torch.fx.GraphModule, symbol: str, exc: BaseException, dump: GraphDump):
    """AOTAutograd's own ATen graph, boxed, after warning once why."""
    fall_back(symbol, exc, dump.reproducer())
    return boxed(make_boxed_func(aot_gm.forward))


def _interpret(graph: Operation) -> bool | None:
    """CPU graphs run in Triton's interpreter; CUDA graphs as the runtime decides."""
    devices = {a.type.device for a in graph.body.args if isinstance(a.type, TensorType)}
    return None if any(d is not None and d.type == "cuda" for d in devices) else True


class FirstCallCheck:
    """Runs the generated `call`; if its first call fails (Triton compiles at first launch), the
    graph falls back to eager for good. The first call gets a copy of the argument list, so that
    generated code that frees its inputs cannot take them from the eager rerun."""

    def __init__(
        self, call: Callable[[list], object], aot_gm: torch.fx.GraphModule, symbol: str, dump
    ):
        self.call, self.aot_gm, self.symbol, self.dump = call, aot_gm, symbol, dump
        self.checked = False

    def __call__(self, args: list) -> object:
        if self.checked:
            return self.call(args)
        try:
            out = self.call(list(args))
        except Exception as exc:
            self.call = eager(self.aot_gm, self.symbol, exc, self.dump)
            out = self.call(args)
        self.checked = True
        return out


def register() -> None:
    """Make `backend="mind"` resolve where the package's entry point is not installed."""
    if "mind" not in entry_points(group="torch_dynamo_backends").names:
        torch._dynamo.register_backend(mind_backend, name="mind")
