"""to-aten: fx -> aten through AOTAutograd, with torch's own decomposition tables. torch loads
when the pass runs (or when capture or the backend call `aten_graphs`), not on import."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from typing import TYPE_CHECKING

from mind.ir.core import Operation
from mind.ir.diagnostics import MindError
from mind.ir.logs import quiet
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
    "leaky_relu",
    "elu",
    "lcm",
    "flip",
    "repeat",
    "tril_indices",
    "triu_indices",
    "_adaptive_avg_pool2d",
    "as_strided_copy",
    "ldexp",
    "addmv",
    "dist",
    "im2col",
    "col2im",
)
#: ops whose rule is Inductor's own table entry (`torch._inductor.decomposition`), as Inductor
#: chooses: torch's reference for some ends in prims neither compiler lowers (`prims.fmax`,
#: `prims.round`), others have no rule outside Inductor's table (`put`, `angle`)
_INDUCTOR_RULES = (
    "fmax",
    "fmin",
    "round.decimals",
    "narrow_copy",
    "view_copy",
    "permute_copy",
    "unbind_copy",
    "index_reduce",
    "put",
    "angle",
    "grid_sampler_2d",
)
#: batch norm in every variant to functional ATen (as Inductor's table does): AOTAutograd
#: refuses the in-place `_native_batch_norm_legit` a conv net in eval mode traces to
_BATCH_NORM = (
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "_batch_norm_with_update",
    "_batch_norm_with_update_functional",
    "_batch_norm_no_update",
    "native_batch_norm",
)
#: core ATen entries that change what an op returns, so torch's table is used without them as
#: Inductor does: the rule for `_scaled_dot_product_flash_attention_for_cpu` serves export and
#: returns the attention weights where the op returns the logsumexp
_EXCLUDED = ("_scaled_dot_product_flash_attention_for_cpu",)


@lru_cache(maxsize=1)
def decompositions() -> dict:
    """torch's core ATen table, plus the extra rules above, less the excluded ones; mind's own
    rules (passes/aten_rules/) over all of them."""
    from torch._decomp import core_aten_decompositions, get_decompositions, remove_decompositions
    from torch._inductor.decomposition import decompositions as inductor_rules

    from .aten_rules import RULES

    extra = [t for n in (*_EXTRA_DECOMPOSITIONS, *_BATCH_NORM) if (t := _aten_op(n))]
    excluded = [t for n in _EXCLUDED if (t := _aten_op(n))]
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(extra))
    ours = {t for n in _INDUCTOR_RULES if (t := _aten_op(n))}
    table.update(
        (op, rule)
        for op, rule in inductor_rules.items()
        if op in ours or getattr(op, "overloadpacket", None) in ours
    )
    remove_decompositions(table, [getattr(t, "default", t) for t in excluded])
    table = {op: partial(_or_the_op, rule) for op, rule in table.items()}
    table.update(RULES)
    return table


def _or_the_op(rule: Callable, *args, **kwargs):
    """torch's `rule`, or where it refuses what eager takes, the op itself (NotImplemented:
    make_fx then traces the op undecomposed, and it lowers or runs in ATen). The references
    check more than the kernels: `addcmul(int, int, int, value=0.5)` raises in `_refs.addcmul`
    ("cannot be safely cast") while eager truncates the value; and a rule may call an op that
    refuses what the decomposed op takes: `_adaptive_avg_pool2d` of a 3-d input with no
    channels (an empty batch of `adaptive_avg_pool1d`) calls `avg_pool2d`, whose check allows
    only the batch to be empty. The op's own meta still raises whatever eager raises."""
    try:
        return rule(*args, **kwargs)
    except (ValueError, TypeError, RuntimeError):
        return NotImplemented


def _aten_op(name: str):
    """`aten.<name>`: a packet, or one overload for `packet.overload`; None where this torch
    has no such op."""
    import torch

    target = torch.ops.aten
    for part in name.split("."):
        target = getattr(target, part, None)
    return target


def aten_graphs(
    gm: torch.fx.GraphModule,
    inputs: list,
    name: str,
    compile_graph: Callable[[torch.fx.GraphModule, str, list], Callable] | None = None,
    cache_tag: str | None = None,
    on_trace: Callable[[], None] | None = None,
) -> tuple[Callable, list[Operation]]:
    """Run AOTAutograd on a Dynamo graph. Returns the callable AOTAutograd built and the list its
    graphs land in, as `aten.graph` ops: the forward now, the backward once AOTAutograd compiles
    it. `compile_graph(aot_gm, symbol, inputs)` replaces that default: it gets each ATen
    GraphModule itself, so that it can fall back to running it, and AOTAutograd's example inputs
    (a backward's laid out as its forward reported its outputs).

    The joint graph splits as Inductor's does, by torch's min-cut partitioner: the backward
    recomputes what is cheap to fuse from what the forward saves (a GELU's tanh from its input)
    rather than the forward writing every intermediate for the backward to read back; pads and
    unfolds that grow a tensor too (`_partition`).

    Through Dynamo's own AOTAutograd backend helper, as Inductor goes: Dynamo's DDPOptimizer
    counts its invocations to pair each bucket's forward with its backward, and to run a piece's
    first call on fake tensors while it propagates shapes to the next piece. With `cache_tag`,
    AOTAutograd's own cache keeps what `compile_graph` returns (an `OutputCode`), under its key
    of the graph and the tag: a new process that compiles the same graph loads it instead of
    tracing (`_aot_cache`), and `on_trace` is called only where AOTAutograd traces."""
    from mind.dialects import aten
    from torch._dynamo import disable
    from torch._dynamo.backends.common import aot_autograd
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    graphs: list[Operation] = []

    def keep(aot_gm: torch.fx.GraphModule, symbol: str, _inputs: list) -> Callable:
        graphs.append(aten.import_graph(aot_gm, symbol))
        return aot_gm.forward

    def compiler(kind: str):
        # a backward compiles lazily inside `loss.backward()`, which may run in a frame Dynamo
        # traces (a compiled training step): Dynamo must not trace the compiler
        @disable(recursive=True)
        def compile_fn(aot_gm: torch.fx.GraphModule, inputs: list):
            # AOTAutograd calls its compilers under its fake mode: the graph's constants, and
            # what a loaded program makes at load, must be real tensors
            with unset_fake_temporarily():
                return (compile_graph or keep)(aot_gm, f"{name}_{kind}", inputs)

        return compile_fn

    forward, backward = compiler("forward"), compiler("backward")
    # the compiler is out of Dynamo's reach (above), and so is what it returns, which is boxed
    # (mind/compiled.py `MindCode.__call__`): the helper's own wrapping would unbox it
    backward._is_wrapped_bw_compiler = True
    with _effect_tokens_in_graph(), _aot_cache(cache_tag) as cached:
        compiled = aot_autograd(
            fw_compiler=cached(forward) if cached else forward,
            bw_compiler=backward,
            partition_fn=_partition,
            decompositions=_Traced(decompositions, on_trace),
            # mutated inputs (batch norm's running stats) are overwritten by the graph, as
            # Inductor asks: `copy_` into the input, which the kernel computing the new value
            # stores into, not a copy AOTAutograd's wrapper makes after the call
            keep_inference_input_mutations=True,
        )(gm, inputs)
    return compiled, graphs


class _Traced(Mapping):
    """The decomposition table, made where AOTAutograd first reads it: it reads it when, and only
    when, it traces, and a graph loaded from its cache traces nothing. Making torch's table and
    mind's rules took 0.2 s of a warm first call on an H100 host. The first read also tells
    `on_trace` that a compile is coming (the backend starts its compile workers then)."""

    def __init__(self, make: Callable[[], dict], on_trace: Callable[[], None] | None):
        self._make, self._on_trace = make, on_trace

    @cached_property
    def _table(self) -> dict:
        if self._on_trace is not None:
            self._on_trace()
        return self._make()

    def __getitem__(self, op):
        return self._table[op]

    def __iter__(self):
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


#: ops that grow a tensor by data movement alone, which torch's min-cut partitioner may not
#: recompute (they are not on its list) though a kernel recomputes them as a masked or strided load
GROWING = ("constant_pad_nd", "unfold")


def _partition(joint: torch.fx.GraphModule, inputs: list, **kwargs):
    """torch's min-cut partitioner, told to recompute in the backward each pad and unfold that
    grows a tensor the backward reads through it (`PREFER_RECOMPUTE`, the tag selective
    activation checkpointing puts): the smaller tensor is saved instead. A stem convolution's
    windows (passes/aten_rules/convolution.py: 122 MB for ResNet-18 at 32 images of 224×224,
    the image 9.6 MB) were saved for the weight's gradient; now the forward need not write them
    (mm-templates' `gathers`), and the backward gathers them again."""
    from torch._functorch.partitioners import _is_tangent, min_cut_rematerialization_partition
    from torch.utils.checkpoint import CheckpointPolicy

    graph = joint.graph
    backward: set = set()  # what the tangents flow into
    for node in graph.nodes:
        if _is_tangent(node) or any(arg in backward for arg in node.all_input_nodes):
            backward.add(node)
    feeds: set = set()  # forward nodes the backward reads, directly or through others
    for node in reversed(graph.nodes):
        if node not in backward and any(u in backward or u in feeds for u in node.users):
            feeds.add(node)
    for node in feeds:
        name = getattr(node.target, "__name__", "").split(".")[0]
        if name in GROWING and "recompute" not in node.meta and _grows(node):
            node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
    return min_cut_rematerialization_partition(joint, inputs, **kwargs)


def _grows(node: torch.fx.Node) -> bool:
    """Whether the node's result holds at least as many elements as its input (a pad, not a
    crop), where the sizes tell."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    out, src = node.meta.get("val"), node.args[0].meta.get("val")
    return out is not None and src is not None and guard_or_false(out.numel() >= src.numel())


@contextmanager
def _aot_cache(tag: str | None) -> Iterator[Callable | None]:
    """AOTAutograd's cache around one compile, as torch's own serializable compile sets it up
    (`aot_compile_joint_with_descriptors`): the compiled graphs stored in the entry (bundled),
    the backward compiled with the forward (a lazy one would be stored after this scope ends).
    The tag joins the key through `cache_key_tag`, which torch provides to keep caches apart.
    Yields what makes a forward compiler one whose result AOTAutograd may store, or None when
    the cache is off (no tag, or torch's switches: `TORCHINDUCTOR_AUTOGRAD_CACHE=0`,
    `force_disable_caches`)."""
    import torch
    import torch._functorch.config as functorch_config
    from torch._functorch._aot_autograd.autograd_cache import should_use_local_autograd_cache
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    from torch._inductor.output_code import OutputCode

    if tag is None or not should_use_local_autograd_cache():
        yield None
        return
    key_tag = "|".join(filter(None, (torch.compiler.config.cache_key_tag, tag)))
    with (
        functorch_config.patch(bundled_autograd_cache=True, force_non_lazy_backward_lowering=True),
        torch.compiler.config.patch(cache_key_tag=key_tag),
    ):
        yield partial(SerializableAOTDispatchCompiler, OutputCode)


def _effect_tokens_in_graph():
    """Effect tokens (`with_effects` around ops like `_linalg_check_errors`) made and consumed
    inside the graph, as Inductor asks: otherwise they are graph inputs that AOTAutograd's
    runtime passes as None, which no compiled wrapper can read."""
    import torch._functorch.config as functorch_config

    if not hasattr(functorch_config, "unlift_effect_tokens"):  # feature test
        return contextlib.nullcontext()
    return functorch_config.patch(unlift_effect_tokens=True)


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
        inputs = fake_inputs(graph, mode)
        try:
            with torch.no_grad(), quiet(logging.getLogger(FakeTensorMode.__module__)):
                graphs = aten_graphs(gm, inputs, graph.symbol)[1]
        except MindError:
            raise
        except Exception as exc:  # torch rejects the program: an error in the input
            raise torch_error(exc, graph) from exc
        for made in graphs:  # AOTAutograd's ops have no text: errors about them are at the graph
            made.loc = graph.loc
        return graphs


def torch_error(exc: Exception, graph_op: Operation) -> MindError:
    """What torch said while tracing, at the op it names ("While executing %mm"), or the graph."""
    text = str(exc)
    node = re.search(r"While executing %(\w+)", text)
    loc = next(
        (op.loc for op in graph_op.body.ops if node and op.results and op.result.name == node[1]),
        graph_op.loc,
    )
    message = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return MindError(f"torch rejects this graph: {type(exc).__name__}: {message}", loc)
