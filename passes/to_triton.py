"""to-triton: scheduled -> triton. Each `scheduled.node` becomes a kernel named as Inductor names
it (`triton_per_fused_add_mul_relu_sum_0`); each graph becomes a host wrapper that checks its
inputs, allocates (or reuses) buffers, launches the kernels and calls ATen for externs.

Reuse: a buffer is dead after the last op that reads it; a later allocation of the same storage
size, dtype and device takes it over instead of allocating (graph inputs and outputs never die).
A reinterpret is an alias: its buffer lives as long as it does (forever when it is an output),
and it never enters the pool itself.

Symbolic sizes: launches pass the size symbols and numels as expressions, grids are expressions
the emitted wrapper evaluates, and inputs with symbolic sizes are not asserted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mind.ir.core import Block, Module, Operation, Region, Value, iter_values, map_values
from mind.ir.diagnostics import MindError
from mind.ir.types import TensorType

from .manager import Pass, register_pass
from .reinterpret import alias_of
from .triton_heuristics import MAX_R_BLOCK, PERSISTENT_MAX, grid
from .triton_kernel import build_kernel
from .triton_layout import plan

_KIND_PREFIX = {"pointwise": "poi", "persistent_reduction": "per", "reduction": "red"}
_DEP_ATTRS = ("origins", "writes", "met", "unmet")


def identifier(text: str) -> str:
    """`text` with what a Python name cannot hold replaced (origins and graph symbols are any
    string in IR text; kernels and wrappers are Python functions named after them)."""
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def kernel_name(kind: str, origins: list[str], index: int) -> str:
    fused = identifier("_".join(sorted(set(origins))))
    return (
        f"triton_{_KIND_PREFIX[kind]}_fused_{fused}_{index}"
        if fused
        else f"triton_{_KIND_PREFIX[kind]}_fused_{index}"
    )


def storage_key(t: TensorType) -> tuple:
    """What makes two buffers interchangeable: elements of storage, dtype, device."""
    extent = 0 if 0 in t.shape else 1 + sum((s - 1) * st for s, st in zip(t.shape, t.strides))
    return (extent, t.dtype, t.device)


def _static(t: TensorType) -> bool:
    """Sizes and strides all numbers: a symbolic input is checked by the guards that bound it."""
    return all(isinstance(s, int) for s in (*t.shape, *t.strides))


def _last_uses(ops: list[Operation]) -> dict[Value, int]:
    last: dict[Value, int] = {}
    for i, op in enumerate(ops):
        for op_inner in op.walk():
            for value in op_inner.operands:
                last[value] = i
        for result in op.results:
            last.setdefault(result, i)
    return last


def _extend_to_aliases(ops: list[Operation], last: dict[Value, int], outputs: set[Value]) -> None:
    """A buffer stays live while a reinterpret of it is, and is an output when one is."""
    for op in reversed(ops):
        if op.name == "scheduled.reinterpret":
            base = op.args[0]
            last[base] = max(last[base], last[op.result])
            if op.result in outputs:
                outputs.add(base)


@register_pass
@dataclass(frozen=True)
class ToTriton(Pass):
    """scheduled -> triton: kernels and a host wrapper per graph."""

    name = "to-triton"
    input = "scheduled"
    output = "triton"
    summary = "generate Triton kernels and the host wrapper"

    persistent_max: int = PERSISTENT_MAX
    max_r_block: int = MAX_R_BLOCK
    #: looped softmax computes max and sum of exp in one r-loop (off: one r-loop each)
    online_softmax: bool = True

    def run(self, module: Module) -> Module:
        kernels: list[Operation] = []
        wrappers = []
        single = len(module.ops) == 1
        for graph in module.ops:
            name = "call" if single else f"call_{identifier(graph.symbol)}"
            wrappers.append(_WrapperBuilder(self, graph, kernels).build(name))
        return Module([*kernels, *wrappers])


class _WrapperBuilder:
    def __init__(self, options: ToTriton, graph: Operation, kernels: list[Operation]):
        if graph.name != "scheduled.graph":
            raise MindError(f"to-triton expects scheduled.graph, got '{graph.name}'", graph.loc)
        self.options, self.graph, self.kernels = options, graph, kernels
        self.values: dict[Value, Value] = {}
        self.pool: dict[tuple, list[Value]] = {}
        self.block = Block()

    def add(self, op: Operation) -> Operation:
        return self.block.append(op)

    def build(self, name: str) -> Operation:
        for arg in self.graph.body.args:
            self.values[arg] = self.block.add_arg(Value(arg.name, arg.type))
        for arg in self.block.args:
            t = arg.type
            if isinstance(t, TensorType) and t.strides is not None and _static(t):
                self.add(Operation("triton.assert_size_stride", [arg, t.shape, t.strides]))
        ops = self.graph.body.ops
        last = _last_uses(ops)
        outputs = set(iter_values(ops[-1].args)) if ops else set()
        _extend_to_aliases(ops, last, outputs)
        kept = outputs | set(self.graph.body.args)
        for i, op in enumerate(ops):
            handler = _HANDLERS.get(op.name)
            if handler is None:
                raise MindError(f"to-triton cannot translate '{op.name}'", op.loc)
            handler(self, op)
            for value, end in last.items():
                if end == i and value not in kept and alias_of(value) is None:
                    self.release(value)
        return Operation("triton.wrapper", symbol=name, regions=[Region(self.block)])

    def release(self, value: Value) -> None:
        mapped = self.values.get(value)
        if mapped is not None and isinstance(mapped.type, TensorType) and mapped.type.strides:
            self.pool.setdefault(storage_key(mapped.type), []).append(mapped)

    def allocate(self, result: Value) -> Value:
        t = result.type
        if not isinstance(t, TensorType) or t.strides is None:
            raise MindError(f"scheduled node result '%{result.name}' needs a layout, got {t}")
        free = self.pool.get(storage_key(t))
        if free:
            op = Operation(
                "triton.reuse", [free.pop()], result_types=[t], result_names=[result.name]
            )
        else:
            op = Operation(
                "triton.empty_strided",
                [t.shape, t.strides],
                result_types=[t],
                result_names=[result.name],
            )
        self.values[result] = self.add(op).result
        return self.values[result]

    def on_node(self, node: Operation) -> None:
        for result in node.results:
            self.allocate(result)
        layout = plan(node, self.options.persistent_max, self.options.max_r_block)
        if any(g.numel == 0 for g in layout.groups if g.pid_axis is not None):
            return  # nothing to compute: the (empty) buffers are all there is
        name = kernel_name(layout.config.kind, node.attrs.get("origins", []), len(self.kernels))
        kernel, args = build_kernel(node, layout, name, self.values, self.options.online_softmax)
        self.kernels.append(kernel)
        numels = {g.block: g.numel for g in layout.groups}
        launch_grid = grid(layout.config, numels)
        self.add(Operation("triton.launch", args, {"grid": launch_grid}, symbol=name))

    def on_extern(self, op: Operation) -> None:
        kwargs = {
            k: map_values(v, self.values.__getitem__)
            for k, v in op.attrs.items()
            if k not in _DEP_ATTRS
        }
        args = map_values(op.args, self.values.__getitem__)
        call = Operation(
            "triton.extern",
            args,
            kwargs,
            [r.type for r in op.results],
            [r.name for r in op.results],
            symbol=op.symbol,
        )
        self.add(call)
        self.values.update(zip(op.results, call.results))

    def on_constant(self, op: Operation) -> None:
        const = Operation(
            "triton.constant_tensor",
            [],
            dict(op.attrs),
            [op.result.type],
            [op.result.name],
            symbol=op.symbol,
        )
        self.values[op.result] = self.add(const).result

    def on_reinterpret(self, op: Operation) -> None:
        alias = Operation(
            "triton.reinterpret",
            [self.values[op.args[0]]],
            dict(op.attrs),
            [op.result.type],
            [op.result.name],
            loc=op.loc,
        )
        self.values[op.result] = self.add(alias).result

    def on_output(self, op: Operation) -> None:
        self.add(Operation("triton.output", map_values(op.args, self.values.__getitem__)))


_HANDLERS = {
    "scheduled.node": _WrapperBuilder.on_node,
    "scheduled.extern": _WrapperBuilder.on_extern,
    "scheduled.constant_tensor": _WrapperBuilder.on_constant,
    "scheduled.reinterpret": _WrapperBuilder.on_reinterpret,
    "scheduled.output": _WrapperBuilder.on_output,
}
