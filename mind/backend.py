"""`torch.compile(fn, backend="mind")`: each Dynamo graph goes fx -> aten (AOTAutograd: inference,
or forward and backward) -> loops -> scheduled -> triton -> Python source -> the runtime.

Nothing a user writes may crash compilation: a graph that fails at any step, including the first
call of its compiled code, runs eagerly instead, and one `MindFallbackWarning` says why and where
the reproducer IR is."""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import torch
import torch._dynamo
from torch._functorch.aot_autograd import make_boxed_func

from mind import runtime
from mind.dialects import aten, fx
from mind.dump import GraphDump
from mind.fallback import DYNAMO_CONTROL_FLOW
from mind.frontend import dynamo_guards
from mind.ir.core import Module, Operation
from mind.ir.types import TensorType

PIPELINE = "lower,realize,inline,schedule,fuse,merge-loops,to-triton"


def pipeline() -> str:
    """The passes the backend runs; `MIND_PIPELINE` replaces them (to try options, or leave a
    pass out) without touching code."""
    return os.environ.get("MIND_PIPELINE", PIPELINE)


_GRAPH_NAMES = (f"graph{i}" for i in itertools.count())


class MindFallbackWarning(UserWarning):
    """A graph runs eagerly because mind could not compile it."""


def fall_back(graph: str, exc: BaseException, reproducer: Path | None) -> None:
    where = f"reproducer IR: {reproducer}" if reproducer else "no IR was produced"
    warnings.warn(
        f"mind: graph '{graph}' runs eagerly: {type(exc).__name__}: {exc} ({where})",
        MindFallbackWarning,
        stacklevel=2,
    )


def mind_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The Dynamo backend: AOTAutograd over mind-compiled ATen graphs, or `gm` itself if even
    capture fails."""
    name = next(_GRAPH_NAMES)
    dump = GraphDump(name)
    try:
        dump.stage("fx", Module([fx.import_graph(gm, name, dynamo_guards())]))
        from mind.passes.to_aten import aten_graphs  # loads every pass: a broken one falls back

        compiled, _ = aten_graphs(gm, example_inputs, name, compile_graph=compile_aten_graph)
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
def compile_aten_graph(aot_gm: torch.fx.GraphModule, symbol: str) -> Callable:
    """AOTAutograd's ATen graph as a boxed callable: its generated Triton program, or the graph
    itself. Not traced by Dynamo: AOTAutograd compiles the backward lazily, inside
    `loss.backward()`."""
    dump = GraphDump(symbol)
    try:
        graph = aten.import_graph(aot_gm, symbol)
        source = generate(graph, dump)
        origin = dump.path("triton") or f"{graph.symbol}.triton"
        program = runtime.load(source, graph.symbol, str(origin), interpret=_interpret(graph))
    except Exception as exc:
        return eager(aot_gm, symbol, exc, dump)
    return boxed(FirstCallCheck(program.call, aot_gm, symbol, dump))


def generate(graph: Operation, dump: GraphDump) -> str:
    """The Python source (Triton kernels and `call`) for an `aten.graph`, each stage dumped."""
    from mind.dialects.triton_emit import emit
    from mind.passes import run_pipeline

    dump.stage("aten", Module([graph]))
    source = emit(run_pipeline(Module([graph]), pipeline(), on_pass=dump.after_pass))
    dump.write("py", source)
    return source


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
