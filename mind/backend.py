"""`torch.compile(fn, backend="mind")`: each Dynamo graph goes fx -> aten (AOTAutograd: inference,
or forward and backward) -> loops -> scheduled -> triton -> Python source -> the runtime.

Nothing a user writes may crash compilation: a graph that fails at any step, including the first
call of its compiled code, runs eagerly instead, and one `MindFallbackWarning` says why and where
the reproducer IR is. A bad `mode` or `options` is the caller's error, not a graph's: it raises.

With CUDA graphs (`mode="reduce-overhead"`), each compiled graph on the GPU is recorded and
replayed (mind.runtime.cudagraphs); parameters and buffers, which AOTAutograd names, are read in
place, so a replay copies only the other inputs."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import operator
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import torch
import torch._dynamo

from mind import collector, runtime
from mind.compiled import MindCode, Recording, compiling, output_strides, timed
from mind.dialects import aten, fx
from mind.dialects.collectives import is_collective
from mind.dialects.common import uses_gpu
from mind.dump import GraphDump
from mind.fallback import DYNAMO_CONTROL_FLOW, MindFallbackWarning, fall_back
from mind.fresh_stack import on_fresh_stack
from mind.frontend import dynamo_guards
from mind.higher_order import higher_order_ops, split_around_higher_order_ops
from mind.ir.core import Module, Operation
from mind.ir.logs import channel
from mind.ir.types import SymType, TensorType
from mind.options import Options, pipeline_of, resolve_options
from mind.progress import progress
from mind.runtime import compile_pool
from mind.runtime.launch import ALIGNMENT

__all__ = ["MindFallbackWarning", "compile_aten_graph", "mind_backend", "register"]

_GRAPH_NAMES = (f"graph{i}" for i in itertools.count())
log = channel("output_code")


def mind_backend(
    gm: torch.fx.GraphModule,
    example_inputs: list,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable:
    """The Dynamo backend: AOTAutograd over mind-compiled ATen graphs, or `gm` itself if even
    capture fails. `mode` and `options` are torch.compile's (see mind.options)."""
    opts = resolve_options(mode, options)
    cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)
    # compile workers start once AOTAutograd traces, and run while it and the passes do: a graph
    # loaded from its cache compiles nothing (started at the entry here, they cost GPT-2's warm
    # first call 0.2-0.3 s on an H100)
    on_trace = compile_pool.start if cuda else None
    name = next(_GRAPH_NAMES)
    dump = GraphDump(name)

    def fx_ir() -> Module:
        return Module([fx.import_graph(gm, name, dynamo_guards())])

    try:
        if dump.directory:
            dump.stage("fx", fx_ir())
        from mind.passes.attention_masks import simplify_attention_masks
        from mind.passes.to_aten import aten_graphs  # (a broken pass module falls back)

        if opts.attention_masks and simplify_attention_masks(gm) and dump.directory:
            dump.stage("fx", fx_ir(), "attention-masks")

        compile_graph = timed(functools.partial(compile_aten_graph, options=opts))
        # a dump runs every pass
        tag = None if dump.directory else cache_tag(gm, opts, cuda, example_inputs)
        # the forward's kernels compile while the backward's passes run (runtime.overlapped)
        with compiling(name), collector.quiet(), runtime.overlapped():
            compiled, _ = aten_graphs(
                gm, example_inputs, name, compile_graph, cache_tag=tag, on_trace=on_trace
            )
    except DYNAMO_CONTROL_FLOW:
        raise
    except Exception as exc:
        if dump.last is None:  # the Dynamo graph's IR is made only when it is wanted
            with contextlib.suppress(Exception):
                dump.stage("fx", fx_ir())
        fall_back(name, exc, dump.reproducer())
        return gm.forward
    return compiled


def cache_tag(
    gm: torch.fx.GraphModule, options: Options, cuda: bool, inputs: list = ()
) -> str | None:
    """What AOTAutograd's cache key lacks of what changes mind's result for `gm`: mind's own
    source, all the options, whether deterministic algorithms are on (scatters then store in
    order), the Triton version, the device (runtime.compiler_key), the values of the graph's
    tensor attributes (AOTAutograd keys them by their metadata) and which inputs are aligned
    (parameters compile for their alignment: `aligned_inputs`). None,
    and no caching, for a graph holding a tensor whose bytes cannot be read (a sparse one)."""
    interpret = runtime.default_interpret() if cuda else True
    constants = hashlib.sha256()
    for node in gm.graph.find_nodes(op="get_attr"):
        value = operator.attrgetter(node.target)(gm)
        if isinstance(value, torch.Tensor):
            try:
                data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            except RuntimeError:
                return None
            constants.update(f"{node.target}:".encode() + data.numpy().tobytes())
    deterministic = torch.are_deterministic_algorithms_enabled()
    aligned = [_aligned(x) for x in inputs]
    key = f"{options!r}{deterministic}{constants.hexdigest()}{aligned}"
    return "mind-" + runtime.compiler_key(key, interpret)


@torch._dynamo.disable(recursive=True)
def compile_aten_graph(
    aot_gm: torch.fx.GraphModule,
    symbol: str,
    inputs: list | None = None,
    options: Options | None = None,
) -> MindCode:
    """AOTAutograd's ATen graph as a boxed callable: its generated Triton program, or the graph
    itself. Not traced by Dynamo: AOTAutograd may compile a backward inside
    `loss.backward()`. `inputs` are AOTAutograd's example inputs; the strides of the outputs are
    reported to it (a training forward's saved activations may be laid out otherwise than
    traced: see passes/channels_last.py)."""
    options = options or Options()
    if higher_order_ops(aot_gm):
        return _compile_parts(aot_gm, symbol, options)
    dump = GraphDump(symbol)
    kw: dict[str, Any] = dict(
        options=options, aten=aot_gm, interpret=True, recording=None, uncacheable=_burned_floats()
    )
    try:
        with collector.quiet():  # (a lazy backward compiles outside mind_backend's)
            graph = aten.import_graph(aot_gm, symbol)
            aligned = aligned_inputs(graph, inputs)
            if aligned:
                graph.aligned = aligned
            _layouts(graph, aot_gm, inputs)
            kw.update(interpret=_interpret(graph), recording=_recording(graph, options))
            pipeline = pipeline_of(options, torch.are_deterministic_algorithms_enabled())
            call, module_key = load_program(graph, dump, pipeline, kw["interpret"])
            graph.discard()
    except Exception as exc:
        return MindCode.eager(symbol, exc, dump, **kw)
    report_output_strides(output_strides(call))
    return MindCode.compiled(call, module_key, symbol, dump, **kw)


def _compile_parts(aot_gm: torch.fx.GraphModule, symbol: str, options: Options) -> MindCode:
    """A graph holding higher-order ops, which torch runs, and parts around them, which mind
    compiles (mind/higher_order.py). A part compiles outside AOTAutograd's tracing context,
    which describes the whole graph's inputs and outputs, not the part's."""
    from torch._guards import tracing

    def compile_part(part: torch.fx.GraphModule, name: str) -> MindCode:
        with tracing(None):
            return compile_aten_graph(part, name, None, options)

    ops = ", ".join(higher_order_ops(aot_gm))
    log.info("graph %s: split around %s, which torch runs", symbol, ops)
    call = split_around_higher_order_ops(aot_gm, symbol, compile_part)
    why = f"it holds higher-order ops ({ops}), which torch runs"
    return MindCode.split(
        call, options=options, aten=aot_gm, interpret=True, recording=None, uncacheable=why
    )


def _layouts(graph: Operation, aot_gm: torch.fx.GraphModule, inputs: list | None) -> None:
    """What AOTAutograd allows of layouts, in the graph: a training forward's activations saved
    for its backward are `flexible` outputs (their strides are reported, and the backward takes
    them so); a backward's inputs are typed with the strides they come with. Where those are not
    the traced ones, the ATen graph (run should mind's program fail) reshapes where it views, as
    Inductor's `view_to_reshape`: a view of a layout that cannot be viewed fails."""
    from mind.passes.channels_last import restride_inputs

    saved = _saved_outputs(graph)
    if saved:
        graph.body.terminator.flexible = saved
    if inputs is not None and restride_inputs(graph, [_static_strides(x) for x in inputs]):
        views = aot_gm.graph.find_nodes(op="call_function", target=torch.ops.aten.view.default)
        for node in views:
            node.target = torch.ops.aten.reshape.default
        aot_gm.recompile()


def _saved_outputs(graph: Operation) -> list[int]:
    """The positions of a training forward's outputs that are activations for its backward."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None or graph.symbol.endswith("_backward"):
        return []
    try:  # (not a training forward: AOTAutograd saves nothing)
        saved = meta.tensors_saved_for_backwards_slice
    except (AssertionError, AttributeError, TypeError):
        return []
    return list(range(len(graph.body.terminator.args)))[saved]


def _burned_floats() -> str | None:
    """Why the graph must not be stored in AOTAutograd's cache: it holds the value of a Python
    float argument as a constant. AOTAutograd's tensorify pass burns into the graph the float
    of an op that takes no tensor for it (`full_like(x, s)`), guarded by a ShapeEnv guard that
    the cache drops (it keeps guards over sizes); the entry, keyed by a graph alike for every
    float, then serves every later float with this one (torch#194976; Inductor too)."""
    from torch._guards import TracingContext
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    ctx = TracingContext.try_get()
    shape_env = getattr(getattr(ctx, "fake_mode", None), "shape_env", None)
    guards = getattr(shape_env, "guards", None) or ()
    floats = {str(s) for g in guards for s in g.expr.free_symbols if symbol_is_type(s, SymT.FLOAT)}
    return f"it holds the value of Python float {', '.join(sorted(floats))}" if floats else None


def _static_strides(x: object) -> tuple[int, ...] | None:
    strides = x.stride() if isinstance(x, torch.Tensor) else None
    return tuple(strides) if strides is not None and all(type(s) is int for s in strides) else None


def report_output_strides(strides: tuple) -> None:
    """Tell AOTAutograd how the compiled graph lays out its outputs, where it asks (a training
    forward's compile): it lays out the backward's inputs so (`TracingContext.output_strides`,
    as Inductor reports them)."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    if ctx is not None and ctx.output_strides is not None:
        ctx.output_strides[:] = list(strides)


def load_program(
    graph: Operation, dump: GraphDump, pipeline: str, interpret: bool
) -> tuple[Callable[[list], object], str]:
    """The generated module's `call` for `graph`, and the module's key: from the graph cache
    when an earlier process compiled the same graph with the same pipeline (no pass runs), else
    generated and remembered. Dumping (`MIND_DUMP_DIR`) always runs the passes, to write every
    stage. A terminal shows progress."""
    from mind.passes import parse_pipeline, resolve_pipeline

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
    return program.call, runtime.source_key(source, interpret)


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

    def run() -> str:
        # each stage's end is verified; a dump, for debugging, verifies after every pass
        verify = "each" if dump.directory else "stages"
        final = PassManager(passes, verify=verify, on_pass=after).run(Module([graph]))
        source = emit(final)
        final.discard()
        return source

    dump.stage("aten", Module([graph]))
    source = on_fresh_stack(run)  # (the same stack depth whoever compiles: mind/fresh_stack.py)
    dump.write("py", source)
    return source


def _recording(graph: Operation, options: Options) -> Recording | None:
    """What recording `graph` as CUDA graphs needs, when the options ask for it and the graph
    is on a GPU."""
    if not options.cudagraphs or not uses_gpu(graph):
        return None
    args = list(enumerate(graph.body.args))
    symbolic = tuple(
        i
        for i, arg in args
        if isinstance(arg.type, SymType)
        or (isinstance(arg.type, TensorType) and not _static_type(arg.type))
    )
    scalars = tuple(i for i, arg in args if _cpu_scalar(arg.type))
    recording = Recording(_static_inputs(graph), symbolic, _unrecordable(graph), scalars)
    recording.overwritten_inputs = _overwritten_inputs(graph)
    return recording


def _overwritten_inputs(graph: Operation) -> tuple[int, ...]:
    """The inputs the graph overwrites (`copy_` into them: AOTAutograd's input mutations)."""
    position = {arg: i for i, arg in enumerate(graph.body.args)}
    targets = (op.args[0] for op in graph.body.ops if op.name == "aten.copy_.default")
    return tuple(sorted({position[t] for t in targets if t in position}))


def aligned_inputs(graph: Operation, inputs: list | None) -> list[int]:
    """The static inputs (parameters, buffers) that are 16-byte aligned when compiled: as
    Inductor does, the kernels take them as aligned on every call, unchecked (their memory
    is replaced, if ever, by memory the allocator aligns). Other inputs, which a caller may
    pass at any offset (Dynamo does not guard offsets), are checked at each launch."""
    if inputs is None:
        return []
    args = graph.body.args
    static = sorted(i for i in _static_inputs(graph) if i < min(len(inputs), len(args)))
    return [i for i in static if _aligned(inputs[i]) and isinstance(args[i].type, TensorType)]


def _aligned(x: object) -> bool:
    """A tensor at an offset into its storage (which the allocator aligns) of whole 16 bytes."""
    if not isinstance(x, torch.Tensor):
        return False
    offset = x.storage_offset()
    return type(offset) is int and offset * x.element_size() % ALIGNMENT == 0


def _static_inputs(graph: Operation) -> frozenset[int]:
    """The inputs AOTAutograd marks static (parameters, buffers) for a forward graph."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None or graph.symbol.endswith("_backward"):
        return frozenset()
    return frozenset(getattr(meta, "static_input_indices", None) or ())


def _cpu_scalar(t) -> bool:
    """A 0-d CPU tensor: read by value (a kernel's scalar argument, an ATen op's scalar)."""
    return isinstance(t, TensorType) and t.rank == 0 and getattr(t.device, "type", None) == "cpu"


def _static_type(t: TensorType) -> bool:
    return all(isinstance(s, int) for s in (*t.shape, *(t.strides or ())))


#: op tags that make a recording wrong: a host sync that hands the host a value, or an op torch
#: marks unsafe (collectives are not recorded either)
_UNRECORDABLE_TAGS = ("data_dependent_output", "cudagraph_unsafe")
#: an op whose output shape may depend on data (`aten.index.Tensor`, `repeat_interleave`): wrong
#: to record only where it does, i.e. where a result's size is unbacked (a boolean mask's
#: `u0`); integer indices give a size known at compile time, and such a gather records
_DYNAMIC_SHAPE_TAG = "dynamic_output_shape"


def _unrecordable(graph: Operation) -> str | None:
    """Why the graph cannot be recorded: a CPU tensor with dims (0-d ones are read by value, and
    recordings are keyed by their values; meta tensors, such as the philox seed a fused attention
    declares, hold no memory), a host sync, a data-dependent shape."""
    tags = {getattr(torch.Tag, t) for t in _UNRECORDABLE_TAGS if hasattr(torch.Tag, t)}
    dynamic = getattr(torch.Tag, _DYNAMIC_SHAPE_TAG)
    for op in graph.walk():
        for value in [*op.results, *(op.body.args if op.regions else [])]:
            device = getattr(value.type, "device", None)
            recordable = device is None or device.type in ("cuda", "meta")
            if not recordable and not _cpu_scalar(value.type):
                return f"'%{value.name}' is on {device}"
        if is_collective(op):
            return f"'{op.name}' is a collective"
        target = aten.overload(op.name) if op.name.startswith("aten.") else None
        if target is None:
            continue
        if tags & set(target.tags) or dynamic in target.tags and _data_dependent(op):
            return f"'{op.name}' syncs with the host or has a data-dependent shape"
    return None


def _data_dependent(op: Operation) -> bool:
    """Whether a result's size is unbacked: a symbol only running the op binds (torch names
    them u0, u1, ...; sizes known from the inputs are s0, s1, ...)."""
    sizes = [s for r in op.results if isinstance(r.type, TensorType) for s in r.type.shape]
    return any(
        str(symbol).startswith("u")
        for s in sizes
        if not isinstance(s, int)
        for symbol in s.free_symbols
    )


def _interpret(graph: Operation) -> bool:
    """CPU graphs run in Triton's interpreter; GPU graphs as the runtime decides."""
    return runtime.default_interpret() if uses_gpu(graph) else True


def register() -> None:
    """Make `backend="mind"` resolve where the package's entry point is not installed."""
    if "mind" not in entry_points(group="torch_dynamo_backends").names:
        torch._dynamo.register_backend(mind_backend, name="mind")


collector.quiet_while_dynamo_compiles()
