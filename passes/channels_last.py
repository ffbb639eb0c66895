"""channels-last: Inductor's layout optimization for convolution nets (aten -> aten).

cuDNN on recent GPUs, and oneDNN on CPUs, convolve channels-last tensors (NHWC); fed contiguous
(NCHW) ones they convert every input and result. Where the rule below says so, this pass hands
every 4-d and 5-d `convolution` and `convolution_backward` its tensors channels-last (NHWC,
NDHWC): an operand laid out otherwise is converted by an explicit `prims.copy_strided`. The
layouts that changes flow on: each op downstream of a changed layout is typed again by running it
on fake tensors, as eager lays out its results (a pointwise op follows its inputs, a convolution
of channels-last tensors is channels-last), so activations stay channels-last from convolution to
convolution and only the graph's inputs (the image, the weights) are converted. `lower` and
`realize` then lay out buffers as the types say.

Outputs keep the strides they were traced with (a copy where they changed), except the positions
`aten.output` marks `flexible`: the activations a forward saves for its backward, which
AOTAutograd restrides for the backward as the forward reports them (the backend then compiles
the backward for those layouts: `restride_inputs`). An op whose meaning depends on its operands'
memory layout (`as_strided`), or that fake tensors cannot run, gets its changed operands
converted back to their traced layouts.

The rule (Inductor's `decide_layout_opt`), over the convolutions with static sizes (a graph with
symbolic ones is left alone, as Inductor leaves it on GPUs; here on CPUs and under `force` too,
since the types are found again on fake tensors of static sizes):
- on CPU (oneDNN available), always;
- elsewhere, not in a graph of 300 nodes or more per convolution, nodes counted as in the FX
  graph Inductor counts: an op of several results is a node and one more (a `getitem`) per
  result that is used;
- for inference (no `convolution_backward`, no flexible output), when the convolutions' FLOPs,
  weighted by Inductor's measured channels-last time per kind of convolution, do not exceed the
  unweighted total;
- for training, unless a grouped convolution has more than one input channel per group, a
  convolution has at most half as many output channels as input channels (and a kernel wider
  than 1), or every convolution has at most 64 channels in and out.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from mind.analysis.layouts import strides_in_order
from mind.ir.attributes import PyRef
from mind.ir.core import Operation, Value, fresh_name
from mind.ir.symbols import IntLike
from mind.ir.types import TensorType, contiguous_strides

from .manager import GraphPass, option
from .realize import same_layout

Strides = tuple[IntLike, ...]
#: what converts a tensor to other strides (the same values, laid out anew)
COPY_STRIDED = "torch.ops.prims.copy_strided.default"
#: `Relayout._fake_types` answers by signature; a fake run costs a dispatch through torch
_TYPED: dict = {}
_TYPED_MAX = 1 << 14


@dataclass(frozen=True)
class Conv:
    """Where an op of the convolution family holds its activation, weight and groups, and which
    of its operands the channels-last kernels take."""

    input: int
    weight: int
    groups: int
    channels_last: tuple[int, ...]


CONVS = {
    "aten.convolution.default": Conv(input=0, weight=1, groups=8, channels_last=(0, 1)),
    "aten.convolution_backward.default": Conv(input=1, weight=2, groups=9, channels_last=(0, 1, 2)),
}
#: Inductor's measured time of a channels-last convolution over a contiguous one, by kind
#: (torchbench training inputs; the inference rule weighs FLOPs by them)
MULTIPLIERS = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
#: a graph with this many nodes per convolution or more is left alone (few convolutions to speed up)
MAX_NODES_PER_CONV = 300
#: ops whose results depend on where their operands' elements lie in memory
LAYOUT_BOUND = (
    "aten.as_strided.default",
    "aten.as_strided_scatter.default",
    "aten.as_strided_copy.default",
)
CLONE = "aten.clone.default"
#: clone's memory formats: the one a traced copy of a convolution's result asks for, and the one
#: that keeps its operand's layout
CONTIGUOUS_FORMAT = PyRef("torch.contiguous_format")
PRESERVE_FORMAT = PyRef("torch.preserve_format")
#: ops run on fake tensors as another op: a view of a layout that cannot be viewed reshapes (the
#: loops dialect views by position, whatever the layout)
FAKE_AS = {
    "aten.view.default": "aten.reshape.default",
    "aten._unsafe_view.default": "aten.reshape.default",
}


@dataclass(frozen=True)
class ChannelsLast(GraphPass, name="channels-last", input="aten"):
    """Convolutions take and give channels-last tensors where Inductor's rule says so.

    `force` applies it to every graph with convolutions of static sizes, whatever the rule says
    (Inductor's force_layout_optimization)."""

    force: bool = option(False, "convert every graph with convolutions, whatever the rule says")

    def run_graph(self, graph: Operation) -> None:
        convs = [op for op in graph.body.ops if _conv(op) is not None]
        if not convs or not all(_static(op) for op in convs):
            return
        if self.force or wanted(graph, convs):
            Relayout(graph).run(channels_last=True)


def _conv(op: Operation) -> Conv | None:
    """The op's entry in CONVS when it convolves 2-d or 3-d images."""
    conv = CONVS.get(op.name)
    x = op.args[conv.input] if conv is not None else None
    return conv if isinstance(x, Value) and x.type.rank in (4, 5) else None


def _static(op: Operation) -> bool:
    types = [v.type for v in op.operands if isinstance(v.type, TensorType)]
    return all(isinstance(s, int) for t in types for s in (*t.shape, *(t.strides or ())))


def wanted(graph: Operation, convs: list[Operation]) -> bool:
    """Inductor's rule (see the module's docstring)."""
    if _on_onednn(convs):
        return True
    if fx_nodes(graph) >= MAX_NODES_PER_CONV * len(convs):
        return False
    weights = [op.args[_conv(op).weight].type.shape for op in convs]
    if _inference(graph):
        flops = [_flops(op) for op in convs]
        kinds = [_kind(op, w) for op, w in zip(convs, weights)]
        return sum(f * MULTIPLIERS[k] for f, k in zip(flops, kinds)) <= sum(flops)
    return not (
        any(_grouped(op, w) for op, w in zip(convs, weights))
        or any(_in_out(w) for w in weights)
        or all(_small(w) for w in weights)
    )


def fx_nodes(graph: Operation) -> int:
    """The graph's nodes as Inductor's FX graph counts them when its rule runs: placeholders,
    ops, and a `getitem` per used result of an op of several results (a training forward's
    attention saves its statistics: on a ViT, that decides the rule as it decides Inductor's),
    but no `clone`: by then Inductor's post-grad passes have made each copy a `view` needs
    (`x.transpose(1, 2).reshape(...)`, a `clone` and a `view` here) one `reshape`. A 4-layer
    timm ViT's fp32 inference graph on an H100 has 293 nodes there (so its patch embedding
    convolves channels-last, a TF32 cuDNN kernel: 213 µs with the conversions, against 266 µs
    in NCHW) and 304 here, 14 of them clones."""
    getitems = sum(
        sum(1 for r in op.results if r.users) for op in graph.body.ops if len(op.results) > 1
    )
    ops = sum(1 for op in graph.body.ops if op.name != CLONE)
    return len(graph.body.args) + ops + getitems


def _on_onednn(convs: list[Operation]) -> bool:
    """Every convolution runs in oneDNN, which prefers channels-last (CPU, XPU)."""
    import torch

    devices = {
        getattr(op.args[i].type.device, "type", None)
        for op in convs
        for i in (_conv(op).input, _conv(op).weight)
    }
    mkldnn = torch.backends.mkldnn
    return mkldnn.enabled and mkldnn.is_available() and devices <= {"cpu", "xpu"}


def _inference(graph: Operation) -> bool:
    """No backward in the graph, and none to come (no output saved for one)."""
    backward = any(op.name == "aten.convolution_backward.default" for op in graph.body.ops)
    return not backward and not graph.body.terminator.flexible


def _grouped(op: Operation, weight: tuple) -> bool:
    return op.args[_conv(op).groups] > 1 and weight[1] > 1


def _in_out(weight: tuple) -> bool:
    return weight[0] * 2 <= weight[1] and weight[2] > 1


def _small(weight: tuple) -> bool:
    return weight[0] <= 64 and weight[1] <= 64


def _kind(op: Operation, weight: tuple) -> str:
    if _grouped(op, weight):
        return "grouped"
    if _small(weight):
        return "small"
    return "in_out" if _in_out(weight) else "default"


def _flops(op: Operation) -> int:
    """Proportional to a convolution's multiply-adds: each element of its output (of its input,
    transposed) takes one per weight element of a group."""
    conv = _conv(op)
    transposed = op.name == "aten.convolution.default" and op.args[6]
    image = op.args[conv.input].type if transposed else op.result.type
    return math.prod(image.shape) * math.prod(op.args[conv.weight].type.shape[1:])


def _contiguous_clone_of_channels_last(op: Operation) -> bool:
    """Whether `op` copies a channels-last image into a contiguous one: a convolution that
    mind's rules compute as a matmul (aten_rules/convolution.py) gives its result channels-last
    as the matmul lays it out, then contiguous as the library would for a contiguous image. Where
    the graph goes channels-last, the copy keeps the matmul's layout instead."""
    if op.name != CLONE or op.attrs.get("memory_format") != CONTIGUOUS_FORMAT:
        return False
    t = op.args[0].type if isinstance(op.args[0], Value) else None
    if not isinstance(t, TensorType) or t.rank not in (4, 5) or t.strides is None:
        return False
    nhwc = channels_last_strides(t.shape)
    return same_layout(t.shape, t.strides, nhwc) and not same_layout(
        t.shape, t.strides, contiguous_strides(t.shape)
    )


def channels_last_strides(shape: tuple[IntLike, ...]) -> Strides:
    """NHWC (NDHWC) strides of an N, C, *spatial shape: C innermost, then the spatial dims from
    the last, then N (torch's channels_last / channels_last_3d)."""
    return strides_in_order(shape, [1, *range(len(shape) - 1, 1, -1), 0])


class Relayout:
    """Types a graph's ops again downstream of values whose layouts changed, on fake tensors.

    `traced` holds, for each value typed anew, the type the graph was traced with."""

    def __init__(self, graph: Operation):
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.block = graph.body
        self.traced: dict[Value, TensorType] = {}
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.copies: dict[tuple[Value, Strides], Value] = {}
        self.names = {v.name for op in graph.walk() for v in op.results}
        self.names |= {a.name for a in self.block.args}

    def changed(self, value: object) -> bool:
        return isinstance(value, Value) and value in self.traced

    def run(self, channels_last: bool) -> None:
        """Walk the graph once: convolutions get channels-last operands (with `channels_last`),
        ops fed changed layouts are typed again, outputs get their traced layouts back unless
        flexible."""
        for op in list(self.block.ops):
            if op.name == "aten.output":
                self._fix_outputs(op)
                continue
            if channels_last and _contiguous_clone_of_channels_last(op):
                op.set_attr("memory_format", PRESERVE_FORMAT)
                self._retype(op)
                continue
            conv = _conv(op) if channels_last else None
            for pos in conv.channels_last if conv is not None else ():
                value = op.args[pos]
                if isinstance(value, Value):
                    strides = channels_last_strides(value.type.shape)
                    if not same_layout(value.type.shape, value.type.strides, strides):
                        op.set_arg(pos, self.convert(op, value, strides))
            if any(self.changed(v) for v in op.operands):
                self._retype(op)

    def convert(self, op: Operation, value: Value, strides: Strides) -> Value:
        """`value` laid out with `strides`: a `prims.copy_strided` made before `op` (one per
        value and layout)."""
        if (value, strides) in self.copies:
            return self.copies[value, strides]
        t = dataclasses.replace(value.type, strides=strides)
        name = fresh_name(f"{value.name}_strided", self.names.__contains__)
        self.names.add(name)
        copy = Operation(
            "aten.call", [value, list(strides)], {}, [t], [name], symbol=COPY_STRIDED, loc=op.loc
        )
        self.block.insert_before(op, copy)
        traced = self.traced.get(value, value.type)
        if not same_layout(t.shape, t.strides, traced.strides):
            self.traced[copy.result] = traced
        self.copies[value, strides] = copy.result
        return copy.result

    def _retype(self, op: Operation) -> None:
        """`op`'s results typed as fake tensors lay them out; where that cannot be known, its
        changed operands go back to their traced layouts."""
        types = None if op.name in LAYOUT_BOUND else self._fake_types(op)
        if types is None:
            for value in dict.fromkeys(v for v in op.operands if self.changed(v)):
                op.replace_uses(value, self.convert(op, value, self.traced[value].strides))
            return
        for result, t in zip(op.results, types):
            old = result.type
            if isinstance(old, TensorType) and not same_layout(old.shape, old.strides, t.strides):
                self.traced[result] = self.traced.get(result, old)
                result.type = dataclasses.replace(old, strides=t.strides)
        from mind.dialects.aten import confirm

        confirm(op)

    def _fake_types(self, op: Operation) -> list[TensorType] | None:
        """`_run_fake`'s answer, once per signature (`aten.signature`: name, argument types,
        attributes, result types): a model's repeated layers repeat their ops, and a backward
        those of its forward."""
        from mind.dialects.aten import signature

        key = signature(op)
        if key is None:
            return self._run_fake(op)
        if key not in _TYPED:
            if len(_TYPED) >= _TYPED_MAX:
                _TYPED.clear()
            _TYPED[key] = self._run_fake(op)
        return _TYPED[key]

    def _run_fake(self, op: Operation) -> list[TensorType] | None:
        """The tensor types of `op`'s results run on fake tensors of its operands' types; None
        when it cannot run so, or gives results of other dtypes or sizes."""
        import torch
        from mind.dialects.aten import overload, target_of
        from mind.dialects.pyobjects import from_attr, type_of
        from mind.dialects.torch_types import to_torch, to_torch_device

        target, args, kwargs = target_of(op)
        target = overload(FAKE_AS[op.name]) if op.name in FAKE_AS else target
        try:
            with self.mode:
                fakes = {
                    v: torch.empty_strided(
                        v.type.shape,
                        v.type.strides,
                        dtype=to_torch(v.type.dtype),
                        device=to_torch_device(v.type.device),
                    )
                    for v in op.operands
                    if isinstance(v.type, TensorType)
                }
                out = target(*from_attr(args, fakes), **from_attr(kwargs, fakes))
        except Exception:
            return None
        outs = list(out) if isinstance(out, tuple | list) else [] if out is None else [out]
        if len(outs) != len(op.results):
            return None
        types = []
        for result, value in zip(op.results, outs):
            t = type_of(value) if isinstance(value, torch.Tensor) else result.type
            old = result.type
            if isinstance(old, TensorType) and (t.dtype, t.shape) != (old.dtype, old.shape):
                return None
            types.append(t)
        return types

    def _fix_outputs(self, op: Operation) -> None:
        flexible = set(op.flexible or ())
        for pos, value in enumerate(op.args):
            if self.changed(value) and pos not in flexible:
                op.set_arg(pos, self.convert(op, value, self.traced[value].strides))


def restride_inputs(graph: Operation, strides: list[Strides | None]) -> bool:
    """The graph's inputs laid out with `strides` (None: as typed), and the ops downstream of a
    change typed again for them: AOTAutograd hands a backward the activations its forward saved
    laid out as the forward reported them. Whether any input changed."""
    changed = {}
    for arg, new in zip(graph.body.args, strides):
        t = arg.type
        if new is not None and isinstance(t, TensorType) and t.strides is not None:
            if not same_layout(t.shape, t.strides, tuple(new)):
                changed[arg] = dataclasses.replace(t, strides=tuple(new))
    if not changed:
        return False
    relayout = Relayout(graph)
    for arg, t in changed.items():
        relayout.traced[arg], arg.type = arg.type, t
    relayout.run(channels_last=False)
    return True
