"""Builds one `triton.kernel` from one `scheduled.node`, following its Layout.

Every body value is a block: x-only values are [XBLOCK, 1], values that vary along r are
[XBLOCK, R0_BLOCK]. A body splits into phases by how many reductions a value depends on: phase k
holds the work feeding the reductions whose inputs depend on k reductions. A persistent kernel
computes the phases one after the other in registers; a looped kernel runs one r-loop per phase
that reads along r, recomputing the loads it needs (softmax: max, then sum of exp, then the
normalized store). A max and a sum of exp(v - max) share one r-loop (online softmax, see
triton_online_softmax), so softmax reads a row twice.

Symbolic sizes: each size symbol is an int argument named by the symbol, after the numels; a
looped reduction over a symbolic r size runs up to the r0_numel argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch
from mind.dialects.triton import (
    block_dim,
    broadcast_shapes,
    dtype_of,
    neutral,
    ptr_dtype,
    ptr_type,
    shape_of,
)
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import MindError
from mind.ir.symbols import as_int_like, sym
from mind.ir.types import ScalarType, TensorType

from .triton_layout import Group, Layout, size_symbols
from .triton_online_softmax import fuse_online_softmax, online_combine, online_step
from .triton_phases import Phases

_ARG_REDUCTIONS = ("argmax", "argmin")
#: body ops that divide integers: eager raises on a zero divisor (on CPU)
_INTEGER_DIVISIONS = ("floordiv", "remainder", "mod", "fmod")
#: the elementwise op that folds one more value into a looped accumulator
_COMBINE = {
    "sum": "add",
    "prod": "mul",
    "max": "maximum",
    "min": "minimum",
    "any": "logical_or",
    "all": "logical_and",
}


@dataclass
class Scope:
    """What one block of the kernel sees: translated body values, index vars, masks."""

    block: Block
    values: dict[Value, Value] = field(default_factory=dict)
    vars: dict[str, Value] = field(default_factory=dict)
    indices: dict[str, Value] = field(default_factory=dict)
    masks: dict[frozenset, Value] = field(default_factory=dict)

    def child(self, block: Block) -> Scope:
        return Scope(
            block, dict(self.values), dict(self.vars), dict(self.indices), dict(self.masks)
        )


class KernelBuilder:
    def __init__(
        self,
        node: Operation,
        layout: Layout,
        name: str,
        buffers: dict[Value, Value],
        online_softmax: bool = True,
    ):
        self.node, self.layout = node, layout
        self.online_softmax = online_softmax
        self.online: dict[Operation, Operation] = {}  # sum -> the max it shares an r-loop with
        self.counter = 0
        self.eviction: str | None = None  # the cache policy of loads in the loop being built
        self.value_groups: dict[Value, frozenset[Group]] = {}
        self.subs: dict[sympy.Symbol, sympy.Expr] = {}
        self._name_vars()
        args, self.launch_args, self.ptrs = self._signature(buffers)
        constexprs = dict(layout.config.blocks)
        attrs = {
            "kind": layout.config.kind,
            "constexprs": constexprs,
            "num_warps": layout.config.num_warps,
            "num_stages": layout.config.num_stages,
            "origins": list(node.attrs.get("origins", [])),
        }
        self.kernel = Operation(
            "triton.kernel", [], attrs, symbol=name, regions=[Region(Block(args))]
        )
        named = {a.name: a for a in args}
        self.numels = {g.prefix: named[f"{g.prefix}numel"] for g in layout.groups}

    # -- naming and signature --------------------------------------------------------------
    def _name_vars(self) -> None:
        n = 0
        for group in self.layout.groups:
            for dim, size in zip(group.dims, group.sizes):
                if size == 1:
                    self.subs[sym(f"p{dim}")] = sympy.Integer(0)
                    continue
                name = f"{group.prefix}{n}"
                self.subs[sym(f"p{dim}")] = sym(name)
                n += 1

    def _signature(self, buffers: dict[Value, Value]):
        loads = [op.args[0] for op in self.node.body.ops if op.name == "scheduled.load"]
        inputs = list(dict.fromkeys(loads))
        args, launch, ptrs = [], [], {}
        for i, value in enumerate(inputs):
            ptrs[value] = Value(f"in_ptr{i}", ptr_type(value.type.dtype))
            args.append(ptrs[value])
            launch.append(buffers[value])
        for i, (write, result) in enumerate(zip(self.node.attrs["writes"], self.node.results)):
            ptrs[write[0]] = Value(f"out_ptr{i}", ptr_type(result.type.dtype))
            args.append(ptrs[write[0]])
            launch.append(buffers[result])
        idt = ScalarType(self.layout.index_dtype)
        for group in self.layout.groups:
            args.append(Value(f"{group.prefix}numel", idt))
            launch.append(group.numel)
        self.sizes = {s.name: Value(s.name, idt) for s in size_symbols(self.node)}
        args += self.sizes.values()
        launch += [sym(name) for name in self.sizes]
        return args, launch, ptrs

    # -- emission helpers ------------------------------------------------------------------
    def emit(self, scope: Scope, name: str, args, dtype, shape, attrs=None, result=None) -> Value:
        if result is None:
            result, self.counter = f"tmp{self.counter}", self.counter + 1
        op = Operation(f"triton.{name}", args, attrs, [TensorType(dtype, tuple(shape))], [result])
        return scope.block.append(op).result

    def emit_op(self, scope: Scope, name: str, args: list[Value], dtype, attrs=None) -> Value:
        shape = broadcast_shapes([shape_of(a) for a in args])
        return self.track(self.emit(scope, name, args, dtype, shape, attrs), dict(enumerate(args)))

    def index(self, scope: Scope, expr, indirect=(), dtype=None) -> Value:
        """A flat index over p vars as a `triton.index` over this scope's vars (reused when the
        same expression was built in this scope)."""
        expr = sympy.sympify(expr).subs(self.subs)
        binds = {}
        for s in sorted(expr.free_symbols, key=str):
            if s.name in scope.vars:
                binds[s.name] = scope.vars[s.name]
            elif (
                s.name.startswith("i") and s.name[1:].isdigit() and int(s.name[1:]) < len(indirect)
            ):
                binds[s.name] = scope.values[indirect[int(s.name[1:])]]
            else:
                raise MindError(f"index uses unknown symbol '{s}'", self.node.loc)
        wide = self.layout.index_dtype == torch.int64 or any(
            dtype_of(v) == torch.int64 for v in binds.values()
        )
        dtype = dtype or (torch.int64 if wide else torch.int32)
        if expr.is_Symbol and dtype_of(binds[expr.name]) == dtype:
            return binds[expr.name]
        key = (expr, dtype, tuple(binds.items()))
        if key not in scope.indices:
            shape = broadcast_shapes([shape_of(v) for v in binds.values()])
            value = self.emit(scope, "index", [as_int_like(expr), binds], dtype, shape)
            scope.indices[key] = self.track(value, binds)
        return scope.indices[key]

    def mask(self, scope: Scope, groups) -> Value | None:
        groups = frozenset(g.prefix for g in groups if g.masked)
        if not groups:
            return None
        if groups not in scope.masks:
            parts = [scope.indices[f"{p}mask"] for p in sorted(groups, reverse=True)]
            value = parts[0]
            for part in parts[1:]:
                value = self.emit_op(scope, "logical_and", [value, part], torch.bool)
            scope.masks[groups] = value
        return scope.masks[groups]

    def groups_of(self, value: Value) -> frozenset[Group]:
        """The groups an index value varies along."""
        return self.value_groups.get(value, frozenset())

    def track(self, value: Value, binds: dict[str, Value]) -> Value:
        self.value_groups[value] = frozenset().union(*(self.groups_of(v) for v in binds.values()))
        return value

    def full(self, scope: Scope, value, dtype, shape) -> Value:
        return self.emit(scope, "full", [value], dtype, shape)

    # -- index groups ------------------------------------------------------------------------
    def bind(
        self, scope: Scope, expr: sympy.Expr, values: list[Value], shape, result: str
    ) -> Value:
        """A `triton.index` over named values: the symbols of `expr` are the values' names, or
        size arguments."""
        names = {v.name: v for v in values}
        names |= {s.name: self.sizes[s.name] for s in expr.free_symbols if s.name in self.sizes}
        value = self.emit(
            scope, "index", [expr, names], self.layout.index_dtype, shape, result=result
        )
        return self.track(value, names)

    def group_index(self, scope: Scope, group: Group, offset: Value | None, base: Value) -> None:
        """xindex = xoffset + xbase, xmask, and the p vars it decomposes into (x0, x1, ...)."""
        p = group.prefix
        parts = [base] if offset is None else [offset, base]
        index = self.bind(scope, sum(sym(v.name) for v in parts), parts, group.shape, f"{p}index")
        self.value_groups[index] = frozenset([group])
        scope.indices[f"{p}index"] = index
        if group.masked:
            mask = self.emit(
                scope, "lt", [index, self.numels[p]], torch.bool, group.shape, result=f"{p}mask"
            )
            scope.indices[f"{p}mask"] = mask
        stride = group.numel
        for dim, size in zip(group.dims, group.sizes):
            stride = as_int_like(sympy.sympify(stride) / size)
            var = self.subs[sym(f"p{dim}")]
            if size == 1:
                continue
            expr = sym(index.name) if stride == 1 else sympy.floor(sym(index.name) / stride)
            if stride * size != group.numel:
                expr = sympy.Mod(expr, size)
            scope.vars[var.name] = self.bind(scope, expr, [index], group.shape, var.name)

    def program_group(self, scope: Scope, group: Group) -> None:
        idt = self.layout.index_dtype
        pid = self.emit(scope, "program_id", [group.pid_axis], idt, (), result=f"{group.prefix}pid")
        offset = self.bind(
            scope, block_dim(group.block) * sym(pid.name), [pid], (), f"{group.prefix}offset"
        )
        self.group_index(scope, group, offset, self.base(scope, group))

    def base(self, scope: Scope, group: Group) -> Value:
        block = block_dim(group.block)
        ar = self.emit(scope, "arange", [0, block], torch.int32, (block,))
        if group.rank == 1:
            return ar
        return self.emit(
            scope,
            "expand_dims",
            [ar, 1 - group.axis],
            torch.int32,
            group.shape,
            result=f"{group.prefix}base",
        )

    # -- the body ----------------------------------------------------------------------------
    def build(self) -> Operation:
        top = Scope(self.kernel.body, vars=dict(self.sizes))
        for group in self.layout.groups:
            if group.pid_axis is not None:
                self.program_group(top, group)
        rgroup = self.layout.rgroup
        if rgroup is not None:
            rbase = self.base(top, rgroup)
            if not self.layout.looped:
                self.group_index(top, rgroup, None, rbase)
        phases = Phases(self.node)
        if self.layout.looped and self.online_softmax:
            self.online = fuse_online_softmax(phases)
        looped = [k for k in range(phases.count) if any(phases.r_work(k))]
        for k in range(phases.count):
            for op in phases.x_ops(k):
                self.translate(top, op)
            reductions, stores = phases.r_work(k)
            if not reductions and not stores:
                continue
            if self.layout.looped:
                # rows read again by a later loop stay in L2; the last loop streams through
                last = k == looped[-1]
                self.eviction = (
                    None if len(looped) == 1 else ("evict_first" if last else "evict_last")
                )
                self.loop(top, rbase, phases, reductions, stores)
                self.eviction = None
            else:
                for op in phases.closure(reductions + stores):
                    if op.results and op.result in top.values:
                        continue
                    if op.name == "scheduled.reduction":
                        top.values[op.result] = self.reduce_rows(top, op)
                    else:
                        self.translate(top, op)
        return self.kernel

    def translate(self, scope: Scope, op: Operation) -> None:
        kind = op.name.split(".", 1)[1]
        handler = getattr(self, f"on_{kind}", None)
        if handler is not None:
            handler(scope, op)
            return
        args = [scope.values[a] for a in op.args]
        if kind in _INTEGER_DIVISIONS and not dtype_of(args[1]).is_floating_point:
            self.check_divisor(scope, args[1])
        scope.values[op.result] = self.emit_op(scope, kind, args, op.result.type.dtype)

    def check_divisor(self, scope: Scope, divisor: Value) -> None:
        """Integer division by zero raises in eager on CPU (CUDA returns a number, and so does
        a CUDA kernel): on CPU, where Inductor's kernels throw too, the kernel asserts."""
        device = self.node.attrs.get("device")
        if getattr(device, "type", device) == "cpu":
            zero = self.full(scope, 0, dtype_of(divisor), (1,) * self.layout.groups[0].rank)
            nonzero = self.emit_op(scope, "ne", [divisor, zero], torch.bool)
            self.device_assert(scope, nonzero, "ZeroDivisionError")

    def on_load(self, scope: Scope, op: Operation) -> None:
        src, index = op.args
        offset = self.index(scope, index, op.attrs.get("indirect", ()))
        mask = self.mask(scope, self.groups_of(offset))
        attrs = {}
        if "mask" in op.attrs:
            body_mask = scope.values[op.attrs["mask"]]
            mask = (
                body_mask
                if mask is None
                else self.emit_op(scope, "logical_and", [body_mask, mask], torch.bool)
            )
        if mask is not None:
            attrs["mask"] = mask
            if "other" in op.attrs:
                attrs["other"] = op.attrs["other"]
        if self.eviction is not None:
            attrs["eviction_policy"] = self.eviction
        if not shape_of(offset):  # one element (a 0-d input): loaded as a block, as Inductor does
            offset = self.block_offset(scope, index, offset, (1,) * self.layout.groups[0].rank)
        shape = broadcast_shapes(
            [shape_of(offset)] + ([shape_of(mask)] if mask is not None else [])
        )
        loaded = self.emit(scope, "load", [self.ptrs[src], offset], src.type.dtype, shape, attrs)
        # a loaded value varies along its offset's groups: an index read from it (a gather)
        # needs their masks too, or masked-off lanes read through a garbage index
        scope.values[op.result] = self.track(loaded, {"offset": offset})

    def on_store(self, scope: Scope, op: Operation) -> None:
        name, index, value = op.args
        ptr = self.ptrs[name]
        v = scope.values[value]
        if dtype_of(v) != ptr_dtype(ptr.type):
            v = self.emit(scope, "cast", [v], ptr_dtype(ptr.type), shape_of(v))
        offset = self.index(scope, index)
        if shape_of(v) and not shape_of(offset):  # one location written from a block (xnumel 1)
            offset = self.block_offset(scope, index, offset, shape_of(v))
        mask = self.mask(scope, self.groups_of(offset))
        op = Operation("triton.store", [ptr, offset, v], {"mask": mask} if mask is not None else {})
        scope.block.append(op)

    def on_check_index(self, scope: Scope, op: Operation) -> None:
        """`0 <= index < bound` as a device assert over the lanes in range, as Inductor emits."""
        index, bound = (scope.values[a] for a in op.args)
        zero = self.full(scope, 0, dtype_of(index), (1,) * self.layout.groups[0].rank)
        above = self.emit_op(scope, "ge", [index, zero], torch.bool)
        below = self.emit_op(scope, "lt", [index, bound], torch.bool)
        ok = self.emit_op(scope, "logical_and", [above, below], torch.bool)
        self.device_assert(scope, ok, "index out of bounds")
        scope.values[op.result] = index

    def device_assert(self, scope: Scope, ok: Value, message: str) -> None:
        """Assert `ok` on the lanes in range (the masks of this scope)."""
        lanes = [g for g in self.layout.groups if f"{g.prefix}mask" in scope.indices]
        mask = self.mask(scope, lanes)
        attrs = {"msg": message, **({"mask": mask} if mask is not None else {})}
        scope.block.append(Operation("triton.device_assert", [ok], attrs))

    def block_offset(self, scope: Scope, index, offset: Value, shape: tuple) -> Value:
        """A scalar offset as a block of `shape` (the interpreter cannot mix 0-d and blocks)."""
        expr = sympy.sympify(index).subs(self.subs)
        kind, arg = ("full", as_int_like(expr)) if expr.is_Integer else ("broadcast_to", offset)
        return self.emit(scope, kind, [arg], dtype_of(offset), shape)

    def on_constant(self, scope: Scope, op: Operation) -> None:
        shape = (1,) * self.layout.groups[0].rank
        scope.values[op.result] = self.full(scope, op.args[0], op.result.type.dtype, shape)

    def on_index(self, scope: Scope, op: Operation) -> None:
        scope.values[op.result] = self.index(scope, op.args[0], dtype=op.result.type.dtype)

    def on_cast(self, scope: Scope, op: Operation) -> None:
        v = scope.values[op.args[0]]
        scope.values[op.result] = self.emit(scope, "cast", [v], op.result.type.dtype, shape_of(v))

    # -- reductions --------------------------------------------------------------------------
    def masked_input(self, scope: Scope, op: Operation, dtype) -> Value:
        """The reduction's input as a full block, masked lanes set to the neutral value."""
        full = self.layout.full_shape
        v = scope.values[op.args[0]]
        if dtype_of(v) != dtype:
            v = self.emit(scope, "cast", [v], dtype, shape_of(v))
        if tuple(shape_of(v)) != full:
            v = self.emit(scope, "broadcast_to", [v], dtype, full)
        mask = self.mask(scope, self.layout.groups)
        if mask is None:
            return v
        other = self.full(
            scope, neutral(op.attrs["reduction_type"], dtype), dtype, (1,) * len(full)
        )
        return self.emit_op(scope, "where", [mask, v, other], dtype)

    def r_index(self, scope: Scope) -> Value:
        index = scope.indices["r0_index"]
        return (
            index
            if dtype_of(index) == torch.int64
            else self.emit(scope, "cast", [index], torch.int64, shape_of(index))
        )

    def reduce_rows(self, scope: Scope, op: Operation) -> Value:
        kind, rdt = op.attrs["reduction_type"], op.result.type.dtype
        xshape = self.layout.groups[0].shape
        if kind in _ARG_REDUCTIONS:
            v = self.masked_input(scope, op, op.args[0].type.dtype)
            index = self.emit(
                scope, "broadcast_to", [self.r_index(scope)], torch.int64, self.layout.full_shape
            )
            return self.emit(
                scope, "reduce_index", [v, index, 1], rdt, xshape, {"reduction_type": kind}
            )
        v = self.masked_input(scope, op, torch.bool if kind in ("any", "all") else rdt)
        return self.emit(scope, "reduce", [v, 1], rdt, xshape, {"reduction_type": kind})

    def loop(self, top: Scope, rbase: Value, phases: Phases, reductions, stores) -> None:
        """One r-loop: accumulators carried along r, reduced across the block after the loop."""
        full, idt = self.layout.full_shape, self.layout.index_dtype
        accs: list[tuple[Operation, list]] = []
        for op in reductions:
            kind = op.attrs["reduction_type"]
            vdt = self.acc_dtype(op)
            inits = [self.full(top, neutral(kind, vdt), vdt, full)]
            if kind in _ARG_REDUCTIONS:
                inits.append(self.full(top, 0, torch.int64, full))
            accs.append((op, inits))
        inits = [v for _, vs in accs for v in vs]
        block = Block([Value("r0_offset", ScalarType(idt))])
        carried = [block.add_arg(Value(f"_acc{i}", v.type)) for i, v in enumerate(inits)]
        # a static trip count as Inductor writes it; a symbolic one runs to the r0_numel argument
        rnumel = self.layout.rgroup.numel
        stop = rnumel if isinstance(rnumel, int) else self.numels["r0_"]
        attrs = {"range": (0, stop, block_dim("R0_BLOCK")), "init": inits}
        loop = Operation(
            "triton.for",
            [],
            attrs,
            [v.type for v in inits],
            [f"tmp{self.counter + i}" for i in range(len(inits))],
            [Region(block)],
        )
        self.counter += len(inits)
        inner = top.child(block)
        self.group_index(inner, self.layout.rgroup, block.args[0], rbase)
        targets = [op for op in reductions if op not in self.online] + stores
        for op in phases.closure(targets):
            if op.name != "scheduled.reduction":
                if not (op.results and op.result in top.values):
                    self.translate(inner, op)
        nexts, i, steps = [], 0, {}
        mask = self.mask(inner, self.layout.groups)
        for op, vs in accs:
            acc = carried[i : i + len(vs)]
            new = self.accumulate(inner, op, acc, steps)
            if mask is not None:
                new = [
                    self.emit_op(inner, "where", [mask, n, a], dtype_of(a))
                    for n, a in zip(new, acc)
                ]
            nexts += new
            i += len(vs)
        block.append(Operation("triton.yield", nexts))
        top.block.append(loop)
        i, outs = 0, {}
        for op, vs in accs:
            kind, rdt, out = (
                op.attrs["reduction_type"],
                op.result.type.dtype,
                loop.results[i : i + len(vs)],
            )
            outs[op], i = out, i + len(vs)
            if op in self.online:
                top_max = self.online[op]
                row_max = top.values[top_max.result]
                top.values[op.result] = online_combine(self, top, out[0], outs[top_max][0], row_max)
                continue
            xshape = self.layout.groups[0].shape
            args = [*out, 1]
            name = "reduce_index" if kind in _ARG_REDUCTIONS else "reduce"
            top.values[op.result] = self.emit(
                top, name, args, rdt, xshape, {"reduction_type": kind}
            )

    def accumulate(self, scope: Scope, op: Operation, acc: list[Value], steps: dict) -> list:
        """A reduction's accumulators after one more block. `steps` keeps each plain one's
        (acc, input, new acc) for an online softmax sum to read its max's step."""
        kind = op.attrs["reduction_type"]
        if op in self.online:
            m, x, m_new = steps[self.online[op]]
            return [online_step(self, scope, acc[0], m, x, m_new)]
        value = self.masked_input(scope, op, dtype_of(acc[0]))
        if kind in _ARG_REDUCTIONS:
            return list(self.combine_index(scope, kind, acc, value, self.r_index(scope)))
        new = self.emit_op(scope, _COMBINE[kind], [acc[0], value], dtype_of(acc[0]))
        steps[op] = (acc[0], value, new)
        return [new]

    @staticmethod
    def acc_dtype(op: Operation) -> torch.dtype:
        kind = op.attrs["reduction_type"]
        if kind in ("any", "all"):
            return torch.bool
        return op.args[0].type.dtype if kind in _ARG_REDUCTIONS else op.result.type.dtype

    def combine_index(self, scope: Scope, kind: str, acc, value: Value, index: Value):
        op = Operation(
            "triton.combine_index", [acc[0], acc[1], value, index], {"reduction_type": kind},
            [acc[0].type, acc[1].type], [f"tmp{self.counter}", f"tmp{self.counter + 1}"],
        )  # fmt: skip
        self.counter += 2
        return scope.block.append(op).results


def build_kernel(
    node: Operation,
    layout: Layout,
    name: str,
    buffers: dict[Value, Value],
    online_softmax: bool = True,
) -> tuple[Operation, list]:
    """The kernel for `node`, and the arguments its launch passes (wrapper values, then numels).
    `buffers` maps the node's inputs and results to the wrapper's values."""
    builder = KernelBuilder(node, layout, name, buffers, online_softmax)
    return builder.build(), builder.launch_args
