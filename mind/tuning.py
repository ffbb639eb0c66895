"""Template or ATen, by benchmark (mode="max-autotune"): `mm-templates{select=autotune}` asks,
for each matmul, whether mind's Triton template beats ATen's kernel (cuBLAS), as Inductor's
select_algorithm does. A probe graph holds the call, what a template would read its operands
through (views, casts, scales: `read_through`) and the epilogue it could take (an activation
stored for the next matmul); it is compiled twice, through the template (its configs tuned at
load, runtime/autotune.py) and through ATen (its operands realized, as the graph would realize
them), and both run under the timer on the same random inputs, of the sizes, strides and dtypes
they have in the graph. So each side pays for what it makes the graph do: the template for the
loads it fuses, ATen for the copies it needs and the epilogue's kernel. The template wins only
where it is clearly faster, in TEMPLATE_MARGIN of ATen's time: the probe times the matmul alone,
and in the graph its neighbours differ (what is in L2, what they store). On an H200, ViT's QKV
projection won its probe by 4% (0.0239 against 0.0249 ms) and cost 20 µs more in the graph.
Inductor takes the faster outright. The answer is recorded in the tuning cache under the probe's
text and what compiles it (the pipelines, mind's source, the torch and Triton versions, the
device), so a later compile of the same problem, a later layer's included, compiles and runs
nothing. Where nothing can be timed (no GPU), it cannot tell, and mm-templates keeps ATen.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import _disable_current_modes

from mind.analysis.loops import base_of, consumers, outer_tensors
from mind.dialects.common import Graph
from mind.dialects.loops import LoopsCall, LoopsOutput, Pointwise, View, is_realized
from mind.dialects.torch_types import to_torch, to_torch_device
from mind.ir.core import Block, Module, Operation, Region, Value
from mind.ir.logs import channel
from mind.ir.types import TensorType, contiguous_strides
from mind.passes.mm_templates import MATMULS, read_through
from mind.passes.realize import NEEDS_BUFFERS
from mind.runtime import at_once, load
from mind.runtime.autotune import Timer, timer_for
from mind.runtime.cache import graph_key, recall_tuning, remember_tuning

log = channel("autotune")

#: the most nodes an epilogue of a probe holds
EPILOGUE_MAX = 16
#: the template replaces ATen where it takes at most this share of ATen's time
TEMPLATE_MARGIN = 0.9
#: the probe's pipelines: through the template, and through ATen (every kernel's configs tuned)
PROBES = {
    way: f"{first}realize,inline,mm-epilogues,schedule,fuse,merge-loops,to-triton{{autotune=true}}"
    for way, first in (("template", "mm-templates{select=template},"), ("aten", ""))
}


def template_wins(call: LoopsCall) -> bool | None:
    """Whether the template computes `call` faster than ATen on its device (None: no timer).
    It runs real tensors while AOTAutograd traces the graph: outside its dispatch modes."""
    with _disable_current_modes():
        return _template_wins(call)


def _template_wins(call: LoopsCall) -> bool | None:
    device = call.result.type.device
    timer = timer_for(to_torch_device(device)) if device is not None else None
    if timer is None:
        return None
    from mind.passes import run_pipeline
    from mind.target.triton import emit

    interpret = device.type != "cuda"
    graph = probe(call)
    # the probe's text and the compiler (pipelines, mind's source, versions, device) decide both
    # programs: a problem met again (each layer's) is answered without compiling them
    key = graph_key(str(Module([graph])), "\n".join(PROBES.values()), interpret)
    record = recall_tuning(key, interpret)
    if record is not None and record.get("winner") in PROBES:
        return record["winner"] == "template"
    inputs = [_random(v.type) for v in graph.body.args]
    graphs = {"template": graph, "aten": probe(call)}  # (each pipeline rewrites its own)
    sources = {way: emit(run_pipeline(Module([graphs[way]]), p)) for way, p in PROBES.items()}
    with at_once():  # it runs now, inside the backend's overlapped compile
        programs = {
            way: load(text, f"mm_probe_{way}", interpret=interpret) for way, text in sources.items()
        }

    def template() -> None:
        programs["template"].call(list(inputs))

    def aten() -> None:
        programs["aten"].call(list(inputs))

    times = {run.__name__: _time(timer, run) for run in (template, aten)}
    if not math.isfinite(min(times.values())):
        return None
    winner = "template" if times["template"] <= TEMPLATE_MARGIN * times["aten"] else "aten"
    problem = (
        f"{call.symbol}({', '.join(str(v.type) for v in call.values if isinstance(v, Value))})"
    )
    remember_tuning(key, interpret, {"winner": winner, "ms": times, "problem": problem})
    log.info(
        "%s: %s (template %.4f ms, ATen %.4f ms)",
        problem, winner, times["template"], times["aten"],
    )  # fmt: skip
    return winner == "template"


def _time(timer: Timer, run: Callable[[], None]) -> float:
    """Milliseconds per run, or inf where the run fails (a template too big for the device's
    shared memory): it then loses, and the compile goes on."""
    try:
        return timer(run)
    except Exception as exc:
        log.info("the probe's %s failed: %s", run.__name__, exc)
        return math.inf


def probe(call: LoopsCall) -> Graph:
    """A graph of the call, of what a template reads its operands through (`read_through`), and
    of the epilogue a template's node could take (`_epilogue`); its inputs are what these read
    from elsewhere, laid out (`_typed`) as in the graph. Timing the matmul alone on contiguous
    operands misjudges a template that reads them permuted and cast: BERT's attention scores, a
    bf16 [b, s, h, d] tensor read as f32 [b*h, d, s], ran 1.5x slower than the probe of
    contiguous f32 operands. Timing it through every unrealized producer misjudges it the other
    way: a GPT-2 layer's probe read the residual stream back through every earlier layer norm."""
    block = call.parent
    (ia, ib), _ = MATMULS[call.symbol]
    epilogue, out = _epilogue(call)
    ops = {call, *epilogue, *(op for i in (ia, ib) for op in read_through(call.values[i])[0])}
    made = {r for op in ops for r in op.results}
    reads = (v for op in block.ops if op in ops for v in outer_tensors(op))
    inputs = dict.fromkeys(v for v in reads if v not in made)  # ordered
    body, vmap = Block(), {}
    for i, v in enumerate(inputs):
        vmap[v] = body.add_arg(Value(f"arg{i}_1", _typed(v, call)))
    for op in block.ops:
        if op in ops:
            body.append(op.clone(vmap))
    for i, result in enumerate(r for op in body.ops for r in op.results):
        result.name = f"v{i}"  # named by position: each layer's probe of a problem prints alike
    body.append(LoopsOutput.build("loops.output", values=[vmap[out]]))
    return Graph.build("loops.graph", regions=[Region(body)], symbol="mm_probe")


def _epilogue(call: LoopsCall) -> tuple[list[Operation], Value]:
    """The pointwise nodes after the call that the graph computes into one value it stores
    anyway, for a call or as an output (a GELU between two Linears: five nodes); with the views
    they read through, and the value the probe outputs. A template's node may take them as its
    epilogue (`fuse` decides, the same in the probe as in the graph); after ATen they are a
    kernel of their own. Nodes that something else reads could be inlined there, a kernel only
    ATen's side of the probe would pay: without one such value, there is no epilogue."""
    block = call.parent
    nodes: set[Operation] = set()
    frontier = [call.result]
    while frontier and len(nodes) <= EPILOGUE_MAX:
        for user in consumers(frontier.pop(), block):
            if type(user) is Pointwise and not is_realized(user) and user not in nodes:
                nodes.add(user)
                frontier.append(user.result)
    while unkept := {n for n in nodes if not _stored_or_read_within(n, nodes)}:
        nodes -= unkept
    sinks = [n for n in nodes if _stored(n)]
    if len(nodes) > EPILOGUE_MAX or len(sinks) != 1 or not consumers(call.result, block) <= nodes:
        return [], call.result
    read = {call.result} | {n.result for n in nodes if n not in sinks}
    views = [op for op in block.ops if isinstance(op, View) and base_of(op.result) in read]
    return [*nodes, *views], sinks[0].result


def _stored(node: Operation) -> bool:
    return any(isinstance(u, NEEDS_BUFFERS) for u in consumers(node.result, node.parent))


def _stored_or_read_within(node: Operation, nodes: set[Operation]) -> bool:
    return _stored(node) or consumers(node.result, node.parent) <= nodes


def _typed(value: Value, call: LoopsCall) -> TensorType:
    """A probe input's type: its layout in the graph; a call's argument without one (computed
    in the graph, not yet realized) laid out as the call takes it (`input_strides`), or
    contiguous."""
    t = value.type
    if t.strides is not None:
        return t
    tensors = [v for v in call.values if isinstance(v, Value) and isinstance(v.type, TensorType)]
    placed = dict(zip(tensors, call.input_strides or ()))
    strides = tuple(placed.get(value) or ()) or contiguous_strides(t.shape)
    return dataclasses.replace(t, strides=strides)


def _random(t: TensorType) -> torch.Tensor:
    out = torch.empty_strided(
        t.shape, t.strides, dtype=to_torch(t.dtype), device=to_torch_device(t.device)
    )
    return out.normal_() if out.is_floating_point() else out.random_(0, 2)
