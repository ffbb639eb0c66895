"""to-triton: scheduled -> triton. Each `scheduled.node` becomes a kernel named as Inductor names
it (`triton_per_fused_add_mul_relu_sum_0`), the nodes of a combo one kernel together
(codegen/combo.py); each graph becomes a host wrapper that checks its inputs, allocates (or
reuses) buffers, launches the kernels and calls ATen for externs.

Reuse: a buffer is dead after the last op that reads it; a later allocation of the same storage
size, dtype and device takes it over instead of allocating (graph inputs and outputs never die).
In place (`in-place`, Inductor's `inplace_buffers`): a node's result of the same layout takes over
the buffer of an input that dies at that node, where the node reads it only at the index it
writes (`analysis.phases.writes_over`), and through no view: peak memory drops by that buffer
(`benchmarks.models`' ResNet, an inference step on an H200: 211 MiB to 138).
Free (`free`, Inductor's `del`): after a buffer's last use (an alias's, a reuse's, a collective's
wait) the wrapper drops its name, so its memory returns to the allocator while the call runs, not
when it returns; outputs and constants are never freed. Inputs are freed too: the wrapper takes
its argument list and clears it (target/wrapper.py), so a backward frees each activation its
forward saved after its last use, where the caller holds it no more.
A reinterpret is an alias: its buffer lives as long as it does (forever when it is an output),
and it never enters the pool itself. A collective is in flight from its start to its wait: its
inputs live until the wait (for ever when it is not waited for here), and its result's memory
enters the pool as the wait's result, never as the start's.

Constants are made once, when the emitted module loads: they never enter the pool, and an
output that is a constant (or a view of one) is a copy, so a caller cannot change the next call's
constant. Input sizes and strides are Dynamo's guards to check (and AOTAutograd's, for a backward
graph's tangents); `assert-inputs` makes the wrapper assert them again on every call.

Symbolic sizes: launches pass the size symbols and numels as expressions, grids are expressions
the emitted wrapper evaluates, and inputs with symbolic sizes are not asserted.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from mind.analysis.deps import reads
from mind.analysis.phases import writes_over
from mind.analysis.views import alias_of, bases, memory_of
from mind.codegen import KernelPlan, plan_node
from mind.codegen.combo import plan_combo
from mind.codegen.heuristics import MAX_R_BLOCK, MAX_WARPS, OUTER_LOAD_WORDS
from mind.codegen.plan import python_name
from mind.dialects.collectives import KINDS, Start, waits_of
from mind.dialects.common import (
    ConstantTensor,
    ExternCall,
    converted_graph,
)
from mind.dialects.scheduled import Node
from mind.dialects.triton import Free, Launch
from mind.ir.attributes import body_key
from mind.ir.core import Block, Module, Operation, Value, iter_values, map_values
from mind.ir.diagnostics import MindError
from mind.ir.symbols import symbol_hints
from mind.ir.types import TensorType

from .manager import Pass, option

_DEP_ATTRS = ("origins", "writes", "met", "unmet")


def storage_key(t: TensorType) -> tuple:
    """What makes two buffers interchangeable: elements of storage, dtype, device."""
    extent = 0 if 0 in t.shape else 1 + sum((s - 1) * st for s, st in zip(t.shape, t.strides))
    return (extent, t.dtype, t.device)


def _static(t: TensorType) -> bool:
    """Sizes and strides all numbers: a symbolic input is checked by the guards that bound it."""
    return all(isinstance(s, int) for s in (*t.shape, *t.strides))


def _last_uses(block: Block) -> dict[Value, int]:
    """The position of the last op that uses each graph input and each op's result (by the use
    lists; a result nothing uses dies where it is made), in order of definition."""
    position = {op: i for i, op in enumerate(block.ops)}
    defined = [(0, a) for a in block.args] + [
        (i, r) for i, op in enumerate(block.ops) for r in op.results
    ]
    return {
        value: max((position[u.ancestor_in(block)] for u in value.users), default=i)
        for i, value in defined
    }


def _extend_to_aliases(ops: list[Operation], last: dict[Value, int], outputs: set[Value]) -> None:
    """A buffer stays live while an alias of it (a reinterpret, its update in place, a view an
    extern call returns) is, and is an output when one is."""
    for op in reversed(ops):
        for result in op.results:
            for base in memory_of(result):
                last[base] = max(last[base], last[result])
                if result in outputs:
                    outputs.add(base)


def _hold_in_flight(ops: list[Operation], last: dict[Value, int]) -> None:
    """A collective reads its inputs until its wait: they stay live until the start's last wait
    (for ever when a result is not waited for here)."""
    position = {op: i for i, op in enumerate(ops)}
    for op in ops:
        if isinstance(op, Start):
            waits = waits_of(op)
            whole = {w.tensor for w in waits} == set(op.results)
            until = max(position[w] for w in waits) if waits and whole else len(ops)
            for value in op.operands:
                last[value] = max(last[value], until)


def _pooled(value: Value) -> bool:
    """Whether `value`'s memory may be taken over once it is dead: not an alias (a reinterpret,
    a scatter's update in place, a view an extern call returns), nor a start's result (the
    memory is its wait's result, which enters the pool instead)."""
    return not memory_of(value) and not isinstance(value.owner, Start)


@dataclass(frozen=True)
class ToTriton(Pass, name="to-triton", input="scheduled", output="triton"):
    """Generate Triton kernels and the host wrapper of each graph."""

    persistent_max: int = option(
        0,
        "reduce rows up to this many elements in registers (persistent); 0: by the row's"
        " element size, 1024 for 32-bit rows and 4096 for 16-bit ones",
    )
    max_r_block: int = option(MAX_R_BLOCK, "the widest block of a looped reduction")
    outer_load_words: int = option(
        OUTER_LOAD_WORDS,
        "a looped column reduction's rows per step shrink (64 to 8) so a thread holds about"
        " this many 32-bit words of its loads",
    )
    max_warps: int = option(
        MAX_WARPS,
        "the most warps of a looped reduction (rows of 8192 elements take 16, of 65536 (16384 of"
        " 32-bit ones) take 32)",
    )
    autotune: bool = option(
        False, "list other configs and kernels for each launch, timed when the module loads"
    )
    cooperative: bool = option(
        True,
        "split long rows read in several phases (a softmax of 65536) between programs that"
        " hold them in registers and merge partials at barriers (on CUDA)",
    )
    assert_inputs: bool = option(
        False, "assert every input's sizes and strides on each call (the guards check them)"
    )
    in_place: bool = option(
        True,
        "a node's result takes over the buffer of an input that dies there, read only where"
        " it is written",
    )
    free: bool = option(
        True,
        "drop each buffer after the last op that uses it (Inductor's del): its memory returns"
        " to the allocator while the call runs",
    )

    def run_module(self, module: Module) -> Module:
        kernels: list[Operation] = []
        wrappers = []
        single = len(module.ops) == 1
        for graph in module.ops:
            name = "call" if single else f"call_{python_name(graph.symbol)}"
            with symbol_hints(graph.attrs.get("hints")):  # configs for the sizes traced
                wrappers.append(_WrapperBuilder(self, graph, kernels).build(name))
        return Module([*_deduplicated(kernels, wrappers), *wrappers])


def _deduplicated(kernels: list[Operation], wrappers: list[Operation]) -> list[Operation]:
    """The kernels less those whose body, arguments and config another has (their names and
    origins aside), which the launches of the first replace, as Inductor does: a model's
    repeated layers give the same kernels, and each distinct one is compiled once."""
    first: dict[str, str] = {}
    same: dict[str, str] = {}
    for kernel in kernels:
        same[kernel.symbol] = first.setdefault(_body_key(kernel), kernel.symbol)
    if all(k == v for k, v in same.items()):
        return kernels
    for wrapper in wrappers:
        for op in wrapper.body.ops:
            if isinstance(op, Launch):
                op.symbol = same[op.symbol]
                if op.candidates:
                    op.candidates = [(same[k], c, g) for k, c, g in op.candidates]
    return [k for k in kernels if same[k.symbol] == k.symbol]


def _body_key(kernel: Operation) -> Hashable:
    config = (
        kernel.kind,
        tuple(sorted(kernel.constexprs.items())),
        kernel.num_warps,
        kernel.num_stages,
    )
    return config, tuple(a.name for a in kernel.body.args), body_key(kernel.body)


class _WrapperBuilder:
    def __init__(self, options: ToTriton, graph: Operation, kernels: list[Operation]):
        if graph.name != "scheduled.graph":
            raise MindError(f"to-triton expects scheduled.graph, got '{graph.name}'", graph.loc)
        self.options, self.graph, self.kernels = options, graph, kernels
        self.values: dict[Value, Value] = {}
        self.pool: dict[tuple, list[Value]] = {}
        self.dying: list[Value] = []  # the values that die at the op being translated
        self.taken: set[Value] = set()  # buffers a result took over in place: never pooled
        self.block = Block()

    def add(self, op: Operation) -> Operation:
        return self.block.append(op)

    def build(self, name: str) -> Operation:
        for arg in self.graph.body.args:
            self.values[arg] = self.block.add_arg(Value(arg.name, arg.type))
        for arg in self.block.args if self.options.assert_inputs else []:
            t = arg.type
            if isinstance(t, TensorType) and t.strides is not None and _static(t):
                self.add(Operation("triton.assert_size_stride", [arg, t.shape, t.strides]))
        ops = self.graph.body.ops
        last = _last_uses(self.graph.body)
        outputs = set(iter_values(ops[-1].args)) if ops else set()
        _hold_in_flight(ops, last)
        _extend_to_aliases(ops, last, outputs)
        constants = {op.result for op in ops if isinstance(op, ConstantTensor)}
        kept = outputs | constants | set(self.graph.body.args)
        dying: dict[int, list[Value]] = {}
        for value, end in last.items():
            if value not in kept and _pooled(value):
                dying.setdefault(end, []).append(value)
        ends = []  # the wrapper's length after each op's translation
        for start, run in _runs(ops):
            handler = _HANDLERS.get(run[0].name)
            if handler is None:
                raise MindError(f"to-triton cannot translate '{run[0].name}'", run[0].loc)
            self.dying = [v for i in range(start, start + len(run)) for v in dying.get(i, [])]
            if len(run) > 1:
                self.on_combo(run)
            else:
                handler(self, run[0])
            for value in self.dying:
                self.release(value)
            ends += [len(self.block.ops)] * len(run)
        if self.options.free:
            self.free(last, ends, outputs | constants)
        return converted_graph(self.graph, "triton.wrapper", self.block, name)

    def free(self, last: dict[Value, int], ends: list[int], kept: set[Value]) -> None:
        """`triton.free` of each buffer after the last op that uses it, or that a collective in
        flight or an alias needs it until (`last`: the graph op where each value dies, `ends`:
        the wrapper's length after each): outputs and constants excepted, what a collective
        never waited for here holds, and a collective's start (its wait's result is the
        memory)."""
        held = {
            self.values.get(v)
            for v, i in last.items()
            if v in kept or i >= len(ends) or isinstance(v.owner, Start)
        }
        dead: dict[Value, int] = {}
        for value, i in last.items():  # a node updating a buffer in place shares its name
            mapped = self.values.get(value)
            if mapped is not None and mapped not in held:
                dead[mapped] = max(dead.get(mapped, 0), ends[i])
        ops = list(self.block.ops)
        for i, op in enumerate(ops):
            for value in op.operands:
                if value in dead:
                    dead[value] = max(dead[value], i + 1)
        after: dict[int, list[Value]] = {}
        for value, end in dead.items():
            if isinstance(value.type, TensorType) and end < len(ops):
                after.setdefault(end, []).append(value)
        for end, values in sorted(after.items(), reverse=True):
            self.block.insert_before(ops[end], Free.build("triton.free", buffers=values))

    def release(self, value: Value) -> None:
        mapped = self.values.get(value)
        if mapped in self.taken or mapped is None:
            return
        if isinstance(mapped.type, TensorType) and mapped.type.strides:
            self.pool.setdefault(storage_key(mapped.type), []).append(mapped)

    def in_place(self, node: Operation, result: Value) -> Value | None:
        """A buffer dying at `node` that `result` may take over (see the module docstring), and
        that the node reads through no alias (a view's element is another program's)."""
        if not self.options.in_place or not self.dying:
            return None
        aliased = {b for v in reads(node) for b in bases(v) if b is not v}
        for value in self.dying:
            mapped = self.values.get(value)
            if (
                mapped is not None
                and mapped not in self.taken
                and value not in aliased
                and mapped.type == result.type
                and writes_over(node, value, result)
            ):
                self.taken.add(mapped)
                return mapped
        return None

    def allocate(self, result: Value, node: Operation) -> Value:
        t = result.type
        if not isinstance(t, TensorType) or t.strides is None:
            raise MindError(f"scheduled node result '%{result.name}' needs a layout, got {t}")
        free = self.pool.get(storage_key(t))
        old = self.in_place(node, result)
        if old is None and free:
            old = free.pop()
        if old is not None:
            op = Operation("triton.reuse", [old], result_types=[t], result_names=[result.name])
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
        """The node's buffers (or the one it updates in place), then its plan's launch and
        kernels (codegen/)."""
        for result in node.results:
            if node.updates is not None:
                self.values[result] = self.values[node.updates]
            else:
                self.allocate(result, node)
        self.add_plan(plan_node(node, self.options, self.values, len(self.kernels)))

    def on_combo(self, nodes: list[Node]) -> None:
        """A combo's nodes: their buffers, none taken over in place (the nodes run at once: one
        may still read what dies at another), then one launch (codegen/combo.py)."""
        dying, self.dying = self.dying, []
        for node in nodes:
            for result in node.results:
                self.allocate(result, node)
        self.dying = dying
        self.add_plan(plan_combo(nodes, self.values, len(self.kernels)))

    def add_plan(self, plan: KernelPlan) -> None:
        self.kernels += plan.kernels
        for launch in plan.launches:
            values = map_values(launch.args, lambda v: self.values.get(v, v))
            candidates = list(launch.candidates) or None
            self.add(
                Launch.build(
                    "triton.launch",
                    values=values,
                    grid=launch.grid,
                    candidates=candidates,
                    symbol=launch.kernel,
                )
            )

    def on_extern(self, op: Operation) -> None:
        call = self.add(op.clone(self.values, "triton.extern"))
        for key in _DEP_ATTRS:  # what scheduling knew; ATen needs only the call
            call.del_attr(key)

    def on_copy(self, op: Operation) -> None:
        """A constant, an alias or a collective: the same op in the triton dialect."""
        self.add(op.clone(self.values, f"triton.{op.kind}"))

    def on_output(self, op: Operation) -> None:
        self.add(Operation("triton.output", map_values(op.values, self.output_value)))

    def output_value(self, value: Value) -> Value:
        """The wrapper value returned for `value`: a copy when it is (a view of) a constant,
        which lives as long as the module and must not be handed to the caller."""
        root = (alias_of(value) or (value, 0))[0]
        if not isinstance(root.owner, ConstantTensor):
            return self.values[value]
        clone = ExternCall.build(
            "triton.extern",
            values=[self.values[value]],
            results=[value.type],
            names=[f"{value.name}_copy"],
            symbol="aten.clone.default",
        )
        return self.add(clone).result


def _runs(ops: list[Operation]) -> list[tuple[int, list[Operation]]]:
    """The ops one at a time, but the nodes of a combo together: (position, ops)."""
    runs: list[tuple[int, list[Operation]]] = []
    for i, op in enumerate(ops):
        combo = op.combo if isinstance(op, Node) else None
        last = runs[-1][1][-1] if runs else None
        if combo is not None and isinstance(last, Node) and last.combo == combo:
            runs[-1][1].append(op)
        else:
            runs.append((i, [op]))
    return runs


_HANDLERS = {
    "scheduled.node": _WrapperBuilder.on_node,
    "scheduled.extern": _WrapperBuilder.on_extern,
    "scheduled.constant_tensor": _WrapperBuilder.on_copy,
    "scheduled.reinterpret": _WrapperBuilder.on_copy,
    "scheduled.output": _WrapperBuilder.on_output,
    **{f"scheduled.{kind}": _WrapperBuilder.on_copy for kind in KINDS},
}
