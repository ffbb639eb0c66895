"""to-aten: fx -> aten through AOTAutograd, with torch's own decomposition tables. torch loads
when the pass runs (or when capture or the backend call `aten_graphs`), not on import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from mind.ir.core import Operation
from mind.ir.diagnostics import MindError
from mind.ir.types import SymType, TensorType, contiguous_strides

from .manager import GraphPass

if TYPE_CHECKING:
    import torch.fx

#: composite ops that core ATen keeps but that mind lowers from their parts (torch's own rules)
_EXTRA_DECOMPOSITIONS = (
    "_softmax",
    "_log_softmax",
    "native_layer_norm",
    "gelu",
    "native_group_norm",
    "_native_batch_norm_legit_no_training",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "mish",
    "logsumexp",
    "addcmul",
    "addcdiv",
    "lerp",
    "linalg_vector_norm",
    "logit",
)


@lru_cache(maxsize=1)
def decompositions() -> dict:
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions([getattr(torch.ops.aten, n) for n in _EXTRA_DECOMPOSITIONS]))
    return table


def aten_graphs(
    gm: torch.fx.GraphModule,
    inputs: list,
    name: str,
    compile_graph: Callable[[Operation], Callable] | None = None,
) -> tuple[Callable, list[Operation]]:
    """Run AOTAutograd on a Dynamo graph. Returns the callable AOTAutograd built and the list its
    graphs land in: the forward now, the backward once AOTAutograd compiles it. `compile_graph`
    turns each aten graph into what runs it; by default the ATen GraphModule itself."""
    from mind.dialects import aten
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs: list[Operation] = []

    def compiler(kind: str):
        def compile_fn(aot_gm: torch.fx.GraphModule, _inputs):
            op = aten.import_graph(aot_gm, f"{name}_{kind}")
            graphs.append(op)
            return compile_graph(op) if compile_graph else aot_gm.forward

        return compile_fn

    compiled = aot_module_simplified(
        gm,
        inputs,
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        decompositions=decompositions(),
    )
    return compiled, graphs


def fake_inputs(graph_op: Operation, mode) -> list:
    import torch
    from mind.dialects import fx
    from mind.dialects.torch_types import to_torch, to_torch_device

    inputs = []
    for t in fx.example_inputs(graph_op):
        if isinstance(t, SymType) or (
            isinstance(t, TensorType) and not all(isinstance(s, int) for s in t.shape)
        ):
            raise MindError(
                f"to-aten from text needs static sizes; '{graph_op.symbol}' has symbolic type {t} "
                "(capture symbolic programs with mind.capture(..., stage='aten'))",
                graph_op.loc,
            )
        if not isinstance(t, TensorType):
            raise MindError(f"to-aten cannot make an example input of type {t}", graph_op.loc)
        device = to_torch_device(t.device) if t.device is not None else "cpu"
        with mode:
            inputs.append(
                torch.empty_strided(
                    t.shape,
                    t.strides or contiguous_strides(t.shape),
                    dtype=to_torch(t.dtype),
                    device=device,
                )
            )
    return inputs


@dataclass(frozen=True)
class ToAten(GraphPass, name="to-aten", input="fx", output="aten"):
    """AOTAutograd with torch's decompositions: each fx graph becomes its forward ATen graph."""

    def run_graph(self, graph: Operation) -> list[Operation]:
        import torch
        from mind.dialects import fx
        from torch._subclasses.fake_tensor import FakeTensorMode

        gm = fx.export_graph(graph)
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with torch.no_grad():
            return aten_graphs(gm, fake_inputs(graph, mode), graph.symbol)[1]
