"""The Dynamo front end: `mind.capture` runs Dynamo on a function and keeps every graph it
captures as IR."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from torch._guards import TracingContext

from mind.dialects import fx
from mind.ir.core import Module, Operation


def dynamo_guards() -> list[str]:
    """The guards Dynamo installed for the graph being compiled, as readable lines."""
    ctx = TracingContext.try_get()
    if ctx is None:
        return []
    return sorted(
        {
            f"{g.create_fn_name()}: {g.name}" if g.name else g.create_fn_name()
            for g in ctx.guards_context.dynamo_guards
        }
    )


def capture(
    fn: Callable, *example_inputs: Any, dynamic: bool | None = None, stage: str = "fx"
) -> Module:
    """Every graph Dynamo captures from `fn(*example_inputs)`, as one module of `stage` IR
    ("fx", or "aten" through AOTAutograd as the backend runs it, symbolic sizes included)."""
    from mind.passes.attention_masks import simplify_attention_masks
    from mind.passes.to_aten import aten_graphs

    if stage not in ("fx", "aten"):
        raise ValueError(f"capture gives 'fx' or 'aten' IR, not {stage!r}")
    graphs: list[Operation] = []
    names = (f"graph{i}" for i in itertools.count())

    def backend(gm: torch.fx.GraphModule, inputs: list) -> Callable:
        name = next(names)
        if stage == "fx":
            graphs.append(fx.import_graph(gm, name, dynamo_guards()))
            return gm.forward
        simplify_attention_masks(gm)  # as the backend does by default
        compiled, produced = aten_graphs(gm, inputs, name)
        graphs.extend(produced)
        return compiled

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=False)(*example_inputs)
    finally:
        torch._dynamo.reset()
    return Module(graphs)
