"""The kernel builder every strategy shares: one `triton.kernel` for one `scheduled.node`, laid
out by a Tiling. It makes the signature (input and output pointers, numels, size symbols), the
program's index blocks and masks, and translates body ops into block ops; a strategy
(codegen/pointwise.py, persistent.py, looped.py) decides how the body's reductions and stores
are arranged around them.

Every body value is a block: x-only values are [XBLOCK, 1], values that vary along r are
[XBLOCK, R0_BLOCK]. Symbolic sizes: each size symbol is an int argument named by the symbol,
after the numels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import sympy
from mind.analysis.loops import EXPR_CACHE_SIZE, rename, renaming
from mind.analysis.phases import Phases
from mind.dialects.loops import CheckIndex, Load
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.dialects.scheduled import Node, overwritten_inputs
from mind.dialects.triton import (
    DeviceAssert,
    block_dim,
    broadcast_shapes,
    dtype_of,
    ptr_dtype,
    ptr_type,
    shape_of,
)
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike, Mod, as_int_like, sym
from mind.ir.types import ScalarType, TensorType

from .heuristics import GRID_YZ_MAX, cdiv, y_folds
from .tiling import Group, Tiling, size_symbols

if TYPE_CHECKING:
    from .plan import Strategy


@dataclass
class Scope:
    """What one block of the kernel sees: translated body values, index vars, masks."""

    block: Block
    values: dict[Value, Value] = field(default_factory=dict)
    vars: dict[str, Value] = field(default_factory=dict)
    indices: dict[str, Value] = field(default_factory=dict)
    masks: dict[frozenset, Value] = field(default_factory=dict)
    #: what a loop carries for body ops that fold along r in order (a scan's running value):
    #: op -> its carry (codegen/scans.py); empty outside an r-loop
    carries: dict[Operation, Any] = field(default_factory=dict)

    def child(self, block: Block) -> Scope:
        return Scope(
            block, dict(self.values), dict(self.vars), dict(self.indices), dict(self.masks)
        )


#: body op kind -> how a kernel computes it, for kinds a module of their own translates (scans
#: and sorts: codegen/scans.py); the builder's `on_<kind>` methods and scalar ops otherwise
HANDLERS: dict[str, Callable[[KernelBuilder, Scope, Operation], None]] = {}


class KernelBuilder:
    """Builds the kernel `name` of kind `kind` for `node`; `buffers` maps the node's inputs and
    results to the wrapper's values, which the launch passes (`launch_args`)."""

    def __init__(
        self, node: Node, tiling: Tiling, kind: str, name: str, buffers: Mapping[Value, Value]
    ):
        self.node, self.tiling = node, tiling
        self.phases = Phases(node)
        self.counter = 0
        self.eviction: str | None = None  # the cache policy of loads in the loop being built
        self.value_groups: dict[Value, frozenset[Group]] = {}
        self.subs: dict[sympy.Symbol, sympy.Expr] = {}
        #: a group's flat index by name (xindex) -> its vars stepped as it steps (152*x0 + x1)
        self.flat: dict[str, sympy.Expr] = {}
        self._name_vars()
        args, self.launch_args, self.ptrs = self._signature(buffers)
        attrs = {
            "kind": kind,
            "constexprs": dict(tiling.config.blocks),
            "num_warps": tiling.config.num_warps,
            "num_stages": tiling.config.num_stages,
            "origins": list(node.origins or []),
        }
        self.kernel = Operation(
            "triton.kernel", [], attrs, symbol=name, regions=[Region(Block(args))], loc=node.loc
        )
        named = {a.name: a for a in args}
        self.numels = {g.prefix: named.get(f"{g.prefix}numel") for g in tiling.groups}

    def build(self, strategy: Strategy) -> Operation:
        """The program's index blocks on the grid axes, then the strategy's body."""
        top = Scope(self.kernel.body, vars=dict(self.sizes))
        for group in self.tiling.groups:  # a static numel is a constant, not an argument
            if self.numels[group.prefix] is None:
                idt, name = self.tiling.index_dtype, f"{group.prefix}numel"
                self.numels[group.prefix] = self.emit(
                    top, "full", [group.numel], idt, (), result=name
                )
        for group in self.tiling.groups:
            if group.pid_axis is not None:
                self.program_group(top, group)
        strategy.body(self, top)
        return self.kernel

    # -- naming and signature --------------------------------------------------------------
    def _name_vars(self) -> None:
        n = 0
        for group in self.tiling.groups:
            for dim, size in zip(group.dims, group.sizes):
                if size == 1:
                    self.subs[sym(f"p{dim}")] = sympy.Integer(0)
                    continue
                name = f"{group.prefix}{n}"
                self.subs[sym(f"p{dim}")] = sym(name)
                n += 1

    def _signature(self, buffers: Mapping[Value, Value]):
        loads = [op.source for op in self.node.body.ops if isinstance(op, Load)]
        inputs = list(dict.fromkeys(loads))
        args, launch, ptrs = [], [], {}
        for i, value in enumerate(inputs):
            by_value = passed_by_value(value.type, self.node.device)
            ptrs[value] = (
                Value(f"in_scalar{i}", ScalarType(by_value))
                if by_value
                else Value(f"in_ptr{i}", ptr_type(value.type.dtype))
            )
            args.append(ptrs[value])
            launch.append(buffers[value])
        # its buffers, then the graph inputs it overwrites without reading them
        written = [*self.node.results, *overwritten_inputs(self.node)]
        for i, result in enumerate(v for v in written if v not in ptrs):
            ptrs[result] = Value(f"out_ptr{i}", ptr_type(result.type.dtype))
            args.append(ptrs[result])
            launch.append(buffers[result])
        idt = ScalarType(self.tiling.index_dtype)
        for group in self.tiling.groups:
            if not isinstance(group.numel, int):
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
        """An elementwise op; its result varies along the groups its operands vary along."""
        shape = broadcast_shapes([shape_of(a) for a in args])
        return self.track(self.emit(scope, name, args, dtype, shape, attrs), dict(enumerate(args)))

    def in_scope(self, expr) -> sympy.Expr:
        """An index over p vars in this kernel's variables."""
        return _substituted(sympy.sympify(expr), tuple(self.subs.items()))

    def index(self, scope: Scope, expr, indirect=(), dtype=None) -> Value:
        """A flat index over p vars as `triton.index` values over this scope's vars: one, or one
        per set of block axes its terms vary along, added (`_parts_by_groups`); reused when the
        same expression was built in this scope."""
        expr = self.flat_indexed(scope, self.in_scope(expr))
        binds = {}
        for s in sorted(expr.free_symbols, key=str):
            if s.name in scope.vars:
                binds[s.name] = scope.vars[s.name]
            elif s.name in self.flat:
                binds[s.name] = scope.indices[s.name]
            elif (
                s.name.startswith("i") and s.name[1:].isdigit() and int(s.name[1:]) < len(indirect)
            ):
                binds[s.name] = scope.values[indirect[int(s.name[1:])]]
            else:
                raise MindError(f"index uses unknown symbol '{s}'", self.node.loc)
        wide = self.tiling.index_dtype == dt.i64 or any(
            dtype_of(v) == dt.i64 for v in binds.values()
        )
        dtype = dtype or (dt.i64 if wide else dt.i32)
        if expr.is_Symbol and dtype_of(binds[expr.name]) == dtype:
            return binds[expr.name]
        key = (expr, dtype, tuple(binds.items()))
        if key not in scope.indices:
            parts = self._parts_by_groups(expr, binds)
            if parts is not None:
                values = [self.index(scope, part, indirect, dtype) for part in parts]
                value = values[0]
                for other in values[1:]:
                    value = self.emit_op(scope, "add", [value, other], dtype)
            else:
                shape = broadcast_shapes([shape_of(v) for v in binds.values()])
                value = self.emit(scope, "index", [as_int_like(expr), binds], dtype, shape)
                value = self.track(value, binds)
            scope.indices[key] = value
        return scope.indices[key]

    def _parts_by_groups(
        self, expr: sympy.Expr, binds: dict[str, Value]
    ) -> list[sympy.Expr] | None:
        """A sum over several block axes split into one sum per set of axes its terms vary along
        (a tile's `(x1 % 7) + 230*((x1 // 7) % 7)` over [1, XBLOCK] and `2*(y0 % 112) + ...` over
        [YBLOCK, 1]): each part computed over its own axes, then one add per element of the
        tile, not one per term. None where no part has more than one term."""
        if not isinstance(expr, sympy.Add):
            return None
        parts: dict[frozenset, list[sympy.Expr]] = {}
        for term in expr.args:
            values = [binds[s.name] for s in term.free_symbols]
            parts.setdefault(frozenset().union(*map(self.groups_of, values)), []).append(term)
        constant = parts.pop(frozenset(), [])
        if len(parts) < 2 or len(expr.args) - len(constant) == len(parts):
            return None
        sums = [sympy.Add(*terms) for terms in parts.values()]
        sums[0] += sympy.Add(*constant)
        return sums

    def flat_indexed(self, scope: Scope, expr: sympy.Expr) -> sympy.Expr:
        """`expr` with the vars of a group that it steps as the group's flat index does written
        as that index (`xindex + 32`, not `152*x0 + x1 + 32`): equal, and what Triton's axis
        analysis sees contiguous, so that the access is vectorized."""
        flats = tuple((name, linear) for name, linear in self.flat.items() if name in scope.indices)
        return _flat_indexed(expr, flats) if flats else expr

    def mask(self, scope: Scope, groups) -> Value | None:
        groups = frozenset(g.prefix for g in groups if g.masked)
        if not groups:
            return None
        if groups not in scope.masks:
            parts = [scope.indices[f"{p}mask"] for p in sorted(groups, reverse=True)]
            value = parts[0]
            for part in parts[1:]:
                value = self.emit_op(scope, "logical_and", [value, part], dt.b8)
            scope.masks[groups] = value
        return scope.masks[groups]

    def _eviction(self, offset: Value) -> str:
        """The loop's cache policy, except that what every row reads alike (a weight, indexed
        along r only) stays in L2 for the next row, as Inductor keeps broadcast loads."""
        if self.groups_of(offset) <= {self.tiling.rgroup}:
            return "evict_last"
        return self.eviction

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
            scope, "index", [expr, names], self.tiling.index_dtype, shape, result=result
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
                scope, "lt", [index, self.numels[p]], dt.b8, group.shape, result=f"{p}mask"
            )
            scope.indices[f"{p}mask"] = mask
        stride, linear = group.numel, []
        for dim, size in zip(group.dims, group.sizes):
            stride = as_int_like(sympy.sympify(stride) / size)
            var = self.subs[sym(f"p{dim}")]
            if size == 1:
                continue
            expr = sym(index.name) if stride == 1 else sympy.floor(sym(index.name) / stride)
            if stride * size != group.numel:
                expr = Mod(expr, size)
            scope.vars[var.name] = self.bind(scope, expr, [index], group.shape, var.name)
            linear.append(stride * var)
        if len(linear) > 1:  # with one var, the var is the index
            self.flat[index.name] = sympy.Add(*linear)

    def program_group(self, scope: Scope, group: Group) -> None:
        p, pid_axis = group.prefix, group.pid_axis
        if pid_axis == 1:
            blocks = cdiv(group.numel, self.tiling.config.blocks[group.block])
            program, pids = self.y_program(scope, p, blocks)
        else:
            idt = self.tiling.index_dtype
            pid = self.emit(scope, "program_id", [pid_axis], idt, (), result=f"{p}pid")
            program, pids = sym(pid.name), [pid]
        scope.indices[f"{p}pid"] = pids[0]  # which of the group's blocks this program is
        offset = self.bind(scope, block_dim(group.block) * program, pids, (), f"{p}offset")
        self.group_index(scope, group, offset, self.base(scope, group))

    def y_program(self, scope: Scope, prefix: str, count: IntLike) -> tuple[sympy.Expr, list]:
        """Which of `count` programs along y this one is, and the program ids it reads: grid
        axis 1, or where the count folds (`y_folds`) axes 1 and 2, as heuristics.y_grid
        launches them."""
        idt = self.tiling.index_dtype
        pid = self.emit(scope, "program_id", [1], idt, (), result=f"{prefix}pid")
        if not y_folds(count):
            return sym(pid.name), [pid]
        pid_z = self.emit(scope, "program_id", [2], idt, (), result=f"{prefix}pid_z")
        return sym(pid.name) + GRID_YZ_MAX * sym(pid_z.name), [pid, pid_z]

    def base(self, scope: Scope, group: Group) -> Value:
        block = block_dim(group.block)
        ar = self.emit(scope, "arange", [0, block], dt.i32, (block,))
        if group.rank == 1:
            return ar
        return self.emit(
            scope,
            "expand_dims",
            [ar, 1 - group.axis],
            dt.i32,
            group.shape,
            result=f"{group.prefix}base",
        )

    def translate(self, scope: Scope, op: Operation) -> None:
        if op.kind in HANDLERS:
            HANDLERS[op.kind](self, scope, op)
            return
        handler = getattr(self, f"on_{op.kind}", None)
        if handler is not None:
            handler(scope, op)
            return
        args = [scope.values[a] for a in op.operands]
        if SCALAR_OPS[op.kind].divides and not dtype_of(args[1]).is_floating_point:
            self.check_divisor(scope, args[1])
        scope.values[op.result] = self.emit_op(scope, op.kind, args, op.result.type.dtype)

    def check_divisor(self, scope: Scope, divisor: Value) -> None:
        """Integer division by zero raises in eager on CPU (CUDA returns a number, and so does
        a CUDA kernel): on CPU, where Inductor's kernels throw too, the kernel asserts."""
        device = self.node.device
        if device is not None and device.type == "cpu":
            zero = self.full(scope, 0, dtype_of(divisor), (1,) * self.tiling.groups[0].rank)
            nonzero = self.emit_op(scope, "ne", [divisor, zero], dt.b8)
            self.device_assert(scope, nonzero, "ZeroDivisionError")

    def on_load(self, scope: Scope, op: Operation) -> None:
        src = op.source
        if isinstance(self.ptrs[src].type, ScalarType):  # a CPU scalar, passed by value
            value = self.ptrs[src]
            if dtype_of(value) != src.type.dtype:
                value = self.emit(scope, "cast", [value], src.type.dtype, ())
            block = (1,) * self.tiling.groups[0].rank
            scope.values[op.result] = self.emit(
                scope, "broadcast_to", [value], src.type.dtype, block
            )
            return
        offset = self.index(scope, op.index, op.indirect or ())
        mask = self.mask(scope, self.groups_of(offset))
        attrs = {}
        if op.mask is not None:
            body_mask = scope.values[op.mask]
            mask = (
                body_mask
                if mask is None
                else self.emit_op(scope, "logical_and", [body_mask, mask], dt.b8)
            )
        if mask is not None:
            attrs["mask"] = mask
            if op.other is not None:
                attrs["other"] = op.other
        if self.eviction is not None:
            attrs["eviction_policy"] = self._eviction(offset)
        if not shape_of(offset):  # one element (a 0-d input): loaded as a block, as Inductor does
            offset = self.block_offset(scope, op.index, offset, (1,) * self.tiling.groups[0].rank)
        shape = broadcast_shapes(
            [shape_of(offset)] + ([shape_of(mask)] if mask is not None else [])
        )
        loaded = self.emit(scope, "load", [self.ptrs[src], offset], src.type.dtype, shape, attrs)
        # a loaded value varies along its offset's groups: an index read from it (a gather)
        # needs their masks too, or masked-off lanes read through a garbage index
        scope.values[op.result] = self.track(loaded, {"offset": offset})

    def on_store(self, scope: Scope, op: Operation) -> None:
        index = op.index
        ptr = self.ptrs[op.buffer]
        v = scope.values[op.value]
        if dtype_of(v) != ptr_dtype(ptr.type):
            v = self.emit(scope, "cast", [v], ptr_dtype(ptr.type), shape_of(v))
        offset = self.index(scope, index, op.indirect or ())
        if op.indirect or op.mode:  # a scatter: every lane in range is one element's write
            offset, v = self.lanes(scope, offset), self.lanes(scope, v)
            mask = self.mask(scope, self.tiling.groups)
        else:
            if shape_of(v) and not shape_of(offset):  # one location written from a block
                offset = self.block_offset(scope, index, offset, shape_of(v))
            mask = self.mask(scope, self.groups_of(offset))
        attrs = {"mask": mask, "mode": op.mode}
        store = Operation("triton.store", [ptr, offset, v], {k: a for k, a in attrs.items() if a})
        scope.block.append(store)

    def lanes(self, scope: Scope, value: Value) -> Value:
        """`value` as a block over every lane of the tile (a scatter's offset or value that
        does not vary along some axis: each lane still writes once)."""
        full = self.tiling.full_shape
        if tuple(shape_of(value)) == full:
            return value
        return self.emit(scope, "broadcast_to", [value], dtype_of(value), full)

    def block_offset(self, scope: Scope, index, offset: Value, shape: tuple) -> Value:
        """A scalar offset as a block of `shape` (the interpreter cannot mix 0-d and blocks)."""
        expr = self.in_scope(index)
        kind, arg = ("full", as_int_like(expr)) if expr.is_Integer else ("broadcast_to", offset)
        return self.emit(scope, kind, [arg], dtype_of(offset), shape)

    def on_check_index(self, scope: Scope, op: CheckIndex) -> None:
        """`0 <= index < bound` as a device assert over the lanes in range, as Inductor emits."""
        index, bound = scope.values[op.index], scope.values[op.bound]
        zero = self.full(scope, 0, dtype_of(index), (1,) * self.tiling.groups[0].rank)
        above = self.emit_op(scope, "ge", [index, zero], dt.b8)
        below = self.emit_op(scope, "lt", [index, bound], dt.b8)
        ok = self.emit_op(scope, "logical_and", [above, below], dt.b8)
        self.device_assert(scope, ok, "index out of bounds")
        scope.values[op.result] = index

    def device_assert(self, scope: Scope, ok: Value, message: str) -> None:
        """Assert `ok` on the lanes in range (the masks of this scope)."""
        lanes = [g for g in self.tiling.groups if f"{g.prefix}mask" in scope.indices]
        mask = self.mask(scope, lanes)
        scope.block.append(
            DeviceAssert.build("triton.device_assert", ok=ok, msg=message, mask=mask)
        )

    def on_constant(self, scope: Scope, op: Operation) -> None:
        shape = (1,) * self.tiling.groups[0].rank
        scope.values[op.result] = self.full(scope, op.value, op.result.type.dtype, shape)

    def on_index(self, scope: Scope, op: Operation) -> None:
        scope.values[op.result] = self.index(scope, op.index, dtype=op.result.type.dtype)

    def on_cast(self, scope: Scope, op: Operation) -> None:
        v = scope.values[op.x]
        scope.values[op.result] = self.emit(scope, "cast", [v], op.result.type.dtype, shape_of(v))

    # -- reductions --------------------------------------------------------------------------
    def masked_input(self, scope: Scope, value: Value, neutral, dtype) -> Value:
        """`value` as a full block of `dtype` whose masked lanes hold `neutral`, as a reduction
        takes it (the neutral value leaves the reduction unchanged)."""
        full = self.tiling.full_shape
        v = value
        if dtype_of(v) != dtype:
            v = self.emit(scope, "cast", [v], dtype, shape_of(v))
        if tuple(shape_of(v)) != full:
            v = self.emit(scope, "broadcast_to", [v], dtype, full)
        mask = self.mask(scope, self.tiling.groups)
        if mask is None:
            return v
        other = self.full(scope, neutral, dtype, (1,) * len(full))
        return self.emit_op(scope, "where", [mask, v, other], dtype)

    def r_index(self, scope: Scope) -> Value:
        """The position along r, as i64 (what argmax/argmin give)."""
        index = scope.indices["r0_index"]
        return (
            index
            if dtype_of(index) == dt.i64
            else self.emit(scope, "cast", [index], dt.i64, shape_of(index))
        )


#: how Triton types a Python scalar of each kind: the type of a parameter passed by value
BY_VALUE = {"f": dt.f32, "i": dt.i64, "u": dt.i64, "b": dt.b8}


def passed_by_value(t: TensorType, device) -> dt.DType | None:
    """The parameter type of a 0-d CPU tensor read by a kernel on another device (Dynamo makes
    a Python float such an input under `dynamic=True`): the kernel cannot read CPU memory, so
    the launch passes its value, as Inductor does; None for a tensor passed as a pointer."""
    if t.shape or t.device is None or t.device.type != "cpu" or device.type == "cpu":
        return None
    return BY_VALUE.get(t.dtype.kind)


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _flat_indexed(expr: sympy.Expr, flats: tuple[tuple[str, sympy.Expr], ...]) -> sympy.Expr:
    """`KernelBuilder.flat_indexed`, memoized: every layer of a model indexes alike."""
    for name, linear in flats:
        if linear.free_symbols <= expr.free_symbols:
            rest = expr - linear
            if not rest.free_symbols & linear.free_symbols:
                expr = rest + sym(name)
    return expr


@lru_cache(maxsize=EXPR_CACHE_SIZE)
def _substituted(expr: sympy.Expr, subs: tuple[tuple[sympy.Symbol, sympy.Expr], ...]) -> sympy.Expr:
    """`expr` with each p var renamed (or zeroed) at once: `xreplace`, not `subs`, which matches
    patterns and substitutes one symbol after another; a plain renaming without evaluating
    anything again (`rename`)."""
    names = renaming(expr, dict(subs))
    return rename(expr, names) if names is not None else expr.xreplace(dict(subs))
