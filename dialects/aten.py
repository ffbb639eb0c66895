"""The aten dialect: AOTAutograd's graph. Every ATen overload is an op, resolved on demand from
torch's own schemas; each value carries dtype, sizes, strides and device.

    aten.graph @forward(%arg0_1: f32[4, 128][128, 1]cpu, %arg1_1: f32[4, 128][128, 1]cpu) {
      %add = aten.add.Tensor(%arg0_1, %arg1_1) : f32[4, 128][128, 1]cpu
      %sum_1 = aten.sum.dim_IntList(%add, [-1]) : f32[4][1]cpu
      aten.output(%sum_1)
    }

Keyword-only arguments are attributes; a tuple-returning op has one result per element; callables
outside the aten namespace (SymInt arithmetic, prims) are `aten.call @target(...)`.
"""

from __future__ import annotations

import logging
import operator
import threading
import traceback
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import torch
import torch.fx
from mind.ir.attributes import PyRef, attr_key
from mind.ir.constraints import (
    ANY,
    ANY_TYPE,
    BOOL,
    DEVICE,
    DTYPE,
    INDEX,
    INT,
    NONE,
    NUMBER,
    OPAQUE,
    SCALAR,
    STR,
    SYM,
    TENSOR,
    Constraint,
    list_of,
    tuple_of,
    value,
)
from mind.ir.core import Block, Operation, Region, Value, map_values
from mind.ir.diagnostics import MindError, located
from mind.ir.logs import quiet
from mind.ir.opdef import (
    ArgField,
    AttrField,
    Field,
    OpDecl,
    OpDef,
    ResultField,
    VarResultField,
    opt_attr,
)
from mind.ir.registry import Dialect, VerifyError, lookup_op, register_dialect
from mind.ir.types import TensorType, contiguous_strides
from torch._subclasses.fake_tensor import FakeTensorMode

from .collectives import (
    KINDS,
    NAMESPACE,
    add_collective_ops,
    call_args,
    is_collective,
    torch_target,
)
from .common import Call, ConstantTensor, Output, add_graph_ops
from .pyobjects import (
    TORCH_ENUMS,
    from_attr,
    host_sizes,
    is_complex,
    qualified_name,
    resolve,
    to_attr,
    type_of,
)
from .torch_types import from_torch, to_torch, to_torch_device


@cache
def overload(name: str) -> torch._ops.OpOverload | None:
    """torch.ops.aten.<op>.<overload> for the op name `aten.<op>.<overload>`, or None."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return None
    packet = getattr(torch.ops.aten, parts[1], None)
    if packet is None or not hasattr(packet, "overloads") or parts[2] not in packet.overloads():
        return None
    return getattr(packet, parts[2])


def op_name(target: torch._ops.OpOverload) -> str:
    return f"aten.{target._schema.name.split('::', 1)[1]}.{target._overloadname}"


@cache
def _resolve(name: str) -> OpDef | None:
    target = overload(name)
    if target is None:
        return None
    schema = target._schema
    fields: list[Field] = [
        (AttrField if a.kwarg_only else ArgField)(
            _constraint(a.real_type), a.has_default_value(), a.name
        )
        for a in schema.arguments
    ]
    if any(isinstance(r.type, torch.ListType) for r in schema.returns):
        fields.append(VarResultField(_RESULT, name="results"))
    else:
        fields += [
            ResultField(
                _RESULT if isinstance(r.type, torch.TensorType) else ANY_TYPE,
                name=r.name or f"result{i}",
            )
            for i, r in enumerate(schema.returns)
        ]
    return OpDef(
        name, OpDecl.of(fields), open_attrs=True, verify=_verify_overload, summary=str(schema)
    )


#: a complex number (`@builtins.complex(0.0, 2.0)`)
_COMPLEX = Constraint("complex", is_complex)
#: a Tensor argument: an SSA value, a number the dispatcher wraps (`aten.mul.Tensor(%x, 2)`,
#: `aten.mul.Tensor(%z, @builtins.complex(0.0, 2.0))`),
#: or none, which torch's argument parser passes as an undefined tensor (AOTAutograd's graphs
#: pass one for an output a forward did not compute: cuDNN attention's `cum_seq_q` on torch 2.11)
_TENSOR = value() | NUMBER | _COMPLEX | NONE
#: an element of a Tensor[] or Tensor?[] (an index's): a value, or none where optional; the
#: dispatcher wraps no number in a list
_TENSOR_ITEMS = {"Tensor": value(TENSOR), "Optional[Tensor]": value(TENSOR) | NONE}
#: an int argument (a dim, a size): an integer, an index expression or an SSA value (a SymInt)
_INT = INDEX | value(SYM)
#: what a Tensor result is typed: a tensor (or `!none` where an output is not computed)
_RESULT = TENSOR | OPAQUE


def _torch_enum(kind: str) -> Constraint:
    """One of torch's constants of a schema type (`@torch.channels_last` for a MemoryFormat)."""
    paths = {f"torch.{name}" for name in TORCH_ENUMS[kind]}
    return Constraint(
        " | ".join(f"@{p}" for p in sorted(paths)),
        lambda x: isinstance(x, PyRef) and x.path in paths,
    )


#: an SSA value standing for a Python number or bool (a SymFloat's, a SymBool's, an item's)
_PY_VALUE = value(SYM | SCALAR | OPAQUE)
#: what an argument of a schema type holds, beyond tensors and ints: a dtype, a device, a
#: torch constant, or a Python value (a float also as an int or a symbolic expression; a
#: Scalar also as a complex number)
_SCHEMA_TYPES: dict[str, Constraint] = {
    "ScalarType": DTYPE,
    "Device": DEVICE,
    "Layout": _torch_enum("Layout"),
    "MemoryFormat": _torch_enum("MemoryFormat"),
    "bool": BOOL | _PY_VALUE,
    "float": NUMBER | INDEX | _PY_VALUE,
    "str": STR,
    "number": NUMBER | INDEX | _PY_VALUE | _COMPLEX,
}


def _constraint(t: torch.JitType) -> Constraint:
    """What an argument of schema type `t` (its real type: a dtype is no int) may hold: tensors,
    ints and the types of `_SCHEMA_TYPES`, alone, optional or in lists, are checked; other
    arguments (a Generator, a list of anything) hold any attribute."""
    if isinstance(t, torch.OptionalType):
        inner = _constraint(t.getElementType())
        return ANY if inner is ANY else inner | NONE
    if isinstance(t, torch.TensorType):
        return _TENSOR
    if isinstance(t, torch.IntType | torch.SymIntType):
        return _INT
    if str(t) in _SCHEMA_TYPES:
        return _SCHEMA_TYPES[str(t)]
    if isinstance(t, torch.ListType) and _constraint(t.getElementType()) is not ANY:
        item = _TENSOR_ITEMS.get(str(t.getElementType())) or _constraint(t.getElementType())
        many = list_of(item) | tuple_of(item, ...)
        return many | _INT if item is _INT else many  # `int[1] dim` takes one int too
    return ANY


def _verify_overload(op: Operation) -> None:
    schema = overload(op.name)._schema
    kwargs = {a.name for a in schema.arguments if a.kwarg_only}
    unknown = [k for k in op.attrs if k not in kwargs]
    if unknown:
        raise VerifyError(f"'{op.name}' has no keyword argument '{unknown[0]}'", op.loc)
    _check_result_types(op)


def _fake_tensor(value: Value) -> torch.Tensor | None:
    """A tensor of `value`'s type on its declared device, made inside a FakeTensorMode: torch's
    meta functions may depend on the device (a CPU embedding_bag leaves offset2bag empty)."""
    t = value.type
    if not isinstance(t, TensorType) or not all(
        isinstance(s, int) for s in (*t.shape, *(t.strides or ()))
    ):
        return None
    device = str(t.device) if t.device is not None else "meta"
    return torch.empty_strided(
        t.shape, t.strides or contiguous_strides(t.shape), dtype=to_torch(t.dtype), device=device
    )


#: signatures (`signature`) whose result types a fake run confirmed: a model's repeated layers
#: repeat their ops, and each run costs a dispatch through torch (a millisecond)
_CONFIRMED: set = set()
_CONFIRMED_MAX = 1 << 14


def signature(op: Operation) -> Hashable | None:
    """What a fake run of `op` depends on: its name, its arguments and attributes with each value
    replaced by its type, its result types; None where some part cannot be hashed."""
    typed = map_values((op.args, dict(op.attrs)), lambda v: v.type)
    key = (op.name, attr_key(typed), tuple(r.type for r in op.results))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _check_result_types(op: Operation) -> None:
    """Run the op on fake tensors of its operands' types and devices, and compare dtype and sizes
    with the declared result types, once per signature."""
    key = signature(op)
    if key is not None and key in _CONFIRMED:
        return
    _run_on_fake(op)
    _confirm(key)


def confirm(op: Operation) -> None:
    """Record that `op`'s result types are what torch's fake run of it gives (its importer or a
    pass ran it so), which the verifier then need not run again."""
    _confirm(signature(op))


def _confirm(key: Hashable | None) -> None:
    if key is not None:
        if len(_CONFIRMED) >= _CONFIRMED_MAX:
            _CONFIRMED.clear()
        _CONFIRMED.add(key)


@contextmanager
def _fake_mode() -> Iterator[FakeTensorMode]:
    """A mode to make fake tensors in, its log of an op that rejects its arguments muted (the
    verifier turns the rejection into a diagnostic). No real kernel runs where an op has no meta
    function: it would allocate the declared sizes. One mode per thread, entered again for each
    op: making one records a stack trace (a millisecond, as long as the op's fake run)."""
    mode = getattr(_THREAD, "fake_mode", None)
    if mode is None:
        mode = _THREAD.fake_mode = FakeTensorMode(allow_fallback_kernels=False)
    with quiet(logging.getLogger(FakeTensorMode.__module__)), mode:
        yield mode


_THREAD = threading.local()


def _run_on_fake(op: Operation) -> None:
    """Raise VerifyError where torch computes other result types than `op` declares."""
    try:
        with _fake_mode():
            fakes = {v: _fake_tensor(v) for v in op.operands}
            if any(f is None for f in fakes.values()):
                return
            out = overload(op.name)(*from_attr(op.args, fakes), **from_attr(dict(op.attrs), fakes))
    except Exception as exc:
        if not _rejection(exc):  # no fake kernel, data-dependent output, ...
            return  # nothing to compare against
        raise VerifyError(f"'{op.name}' rejects its arguments: {exc}", op.loc) from None
    outs = out if isinstance(out, tuple | list) else (out,)
    for result, computed in zip(op.results, outs):
        declared = result.type
        if isinstance(computed, torch.Tensor) and isinstance(declared, TensorType):
            dtype = from_torch(computed.dtype)
            if dtype != declared.dtype or tuple(computed.shape) != tuple(declared.shape):
                got = TensorType(dtype, tuple(computed.shape))
                raise VerifyError(
                    f"type mismatch: '{op.name}' computes {got} but '%{result.name}' is declared "
                    f"{TensorType(declared.dtype, declared.shape)}",
                    op.loc,
                )


def _rejection(exc: Exception) -> bool:
    """Whether torch refused the arguments: a dim out of range (IndexError), a wrong kind of
    argument (TypeError), or a failed `torch._check` of its sizes or dtypes in a meta function
    (a RuntimeError that `torch._check_with` raised). Other errors say that a fake run cannot
    tell: no fake kernel, an output whose size depends on data, operands on `meta` beside
    `cuda` (fused attention's philox seed, which the real kernel takes; torch's fake tensors
    refuse it, with a plain RuntimeError before FakeTensorDeviceMismatchError came)."""
    if isinstance(exc, IndexError | TypeError):
        return True
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    return bool(frames) and frames[-1].f_code is torch._check_with.__code__


class AtenOutput(Output):
    """The graph's outputs, in order; those at `flexible` positions take the compiler's layout"""

    #: activations a forward saves for its backward: AOTAutograd lays out what the backward
    #: takes as the forward reports its outputs laid out
    flexible = opt_attr(list_of(INT))


ATEN = register_dialect(Dialect("aten", resolve=_resolve))
add_graph_ops(
    ATEN, AtenOutput, summary="A forward or backward graph; its arguments are the graph inputs"
)
ATEN.add("call", Call, symbol=True, open_attrs=True,
         summary="A callable outside the aten namespace (SymInt arithmetic, prims)")  # fmt: skip
ATEN.add("constant", ConstantTensor, symbol=True)
add_collective_ops(ATEN)


def import_graph(gm: torch.fx.GraphModule, name: str) -> Operation:
    """An ATen-level GraphModule (from AOTAutograd) as an `aten.graph` op, with the `hints` of
    its size symbols."""
    hints = traced_hints(gm)
    with host_sizes(_host_values(gm)):
        block = _import_block(gm)
    return Operation(
        "aten.graph",
        attrs={"hints": hints} if hints else None,
        regions=[Region(block)],
        symbol=name,
    )


def traced_hints(gm: torch.fx.GraphModule) -> dict[str, int]:
    """Each symbol that is a size of one of the graph's input tensors, and the value it had where
    Dynamo traced the graph (its shape environment's; a data-dependent size has none), by name.
    Not the other symbols: an index made symbolic may be negative (a size `s0 + s1` with s1 = -4).
    """
    hints: dict[str, int] = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for size in val.shape:
            if isinstance(size, torch.SymInt):
                expr, known = size.node.expr, _backed_values(size.node.shape_env)
                if expr in known:
                    hints[expr.name] = int(known[expr])
    return dict(sorted(hints.items()))


def _backed_values(shape_env: Any) -> dict:
    """The shape environment's value of each backed symbol: `backed_var_to_val` since torch
    2.14, which deprecates the older name (a FutureWarning on every first compile)."""
    if hasattr(shape_env, "backed_var_to_val"):
        return shape_env.backed_var_to_val
    return shape_env.var_to_val


def _host_values(gm: torch.fx.GraphModule) -> Iterator[Any]:
    """The values the wrapper has at hand: what each node computes (a SymInt's, on the host) and
    the sizes of the graph's input tensors (a backward's gradients have its forward's sizes)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and isinstance(val, torch.Tensor):
            yield from val.shape
        else:
            yield val


def _import_block(gm: torch.fx.GraphModule) -> Block:
    block = Block()
    values: dict[torch.fx.Node, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            values[node] = block.add_arg(Value(node.name, type_of(node.meta["val"])))
        elif node.op == "output":
            block.append(Operation("aten.output", list(to_attr(tuple(node.args[0]), values))))
        elif node.op == "get_attr":
            data = getattr(gm, node.target)
            if not isinstance(data, torch.Tensor):
                kind = "graph" if isinstance(data, torch.fx.GraphModule) else type(data).__name__
                raise MindError(
                    f"'{node.target}' is a {kind}, not a tensor: the aten dialect holds no graphs "
                    "(a higher-order op's argument; the backend compiles around such ops)"
                )
            op = Operation(
                "aten.constant",
                attrs={"data": data.flatten().tolist()},
                result_types=[type_of(data)],
                result_names=[node.name],
                symbol=node.target,
            )
            values[node] = block.append(op).result
        elif node.target is operator.getitem and isinstance(values.get(node.args[0]), tuple):
            values[node] = values[node.args[0]][node.args[1]]
        else:
            op = block.append(_import_call(node, values))
            confirm(op)  # its result types are what torch's fake run of it gave (`val`)
            values[node] = op.results
            if len(values[node]) == 1 and not isinstance(node.meta.get("val"), tuple | list):
                values[node] = values[node][0]
            else:
                values[node] = tuple(values[node])
    return block


def _import_call(node: torch.fx.Node, values: dict) -> Operation:
    val = node.meta.get("val")
    examples = list(val) if isinstance(val, tuple | list) else [val]
    target = node.target
    kind = collective_kind(target)
    if kind is not None:
        return _import_collective(kind, node, values, examples)
    args, kwargs = to_attr(node.args, values), to_attr(dict(node.kwargs), values)
    opdef = None
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        opdef = lookup_op(op_name(target))
    if opdef is not None and not opdef.decl.results:
        examples = []  # `_assert_scalar`: no result, as its declaration says
    names = [node.name] if len(examples) == 1 else _getitem_names(node, len(examples))
    types = [type_of(e) for e in examples]
    if opdef is not None:
        return Operation(opdef.name, list(args), kwargs, types, names)
    return Operation("aten.call", list(args), kwargs, types, names, symbol=qualified_name(target))


def collective_kind(target: object) -> str | None:
    """`all_reduce` for `torch.ops._c10d_functional.all_reduce.default`; None for a target that
    is no collective (dialects/collectives.py)."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != NAMESPACE:
        return None
    kind = target._schema.name.split("::", 1)[1]
    return kind if kind in KINDS and target._overloadname == "default" else None


def _import_collective(kind: str, node: torch.fx.Node, values: dict, examples: list) -> Operation:
    """`aten.<kind>`: the schema's first argument (a tensor or a list of them) as the op's
    arguments, the others as attributes by name."""
    first, *rest = node.target._schema.arguments
    given = dict(zip((a.name for a in node.target._schema.arguments), node.args)) | node.kwargs
    tensors = to_attr(given[first.name], values)
    attrs = {a.name: to_attr(given[a.name], values) for a in rest}
    names = [node.name] if not isinstance(node.meta.get("val"), list) else None
    names = names or _getitem_names(node, len(examples))
    args = tensors if isinstance(tensors, list) else [tensors]
    return Operation(f"aten.{kind}", args, attrs, [type_of(e) for e in examples], names)


def collective_call(op: Operation) -> tuple[torch._ops.OpOverload, list, dict]:
    """The torch op a collective of any dialect runs, its arguments and keyword arguments (as
    attribute values): a start's inputs as one list when it takes several."""
    return resolve(f"torch.ops.{torch_target(op.kind)}"), call_args(op), dict(op.attrs)


def _getitem_names(node: torch.fx.Node, count: int) -> list[str]:
    names = [f"{node.name}_{i}" for i in range(count)]
    for user in node.users:
        if user.target is operator.getitem:
            names[user.args[1]] = user.name
    return names


def export_graph(graph_op: Operation) -> torch.fx.GraphModule:
    """An executable GraphModule that computes what the `aten.graph` op says (a reference)."""
    graph = torch.fx.Graph()
    root = torch.nn.Module()
    nodes: dict[Value, torch.fx.Node] = {a: graph.placeholder(a.name) for a in graph_op.body.args}
    for op in graph_op.body.ops:
        with located(op.loc):
            _export_op(op, graph, root, nodes)
    return torch.fx.GraphModule(root, graph)


def _export_op(op: Operation, graph: torch.fx.Graph, root: torch.nn.Module, nodes: dict) -> None:
    if op.name == "aten.output":
        graph.output(tuple(from_attr(op.args, nodes)))
        return
    if op.name == "aten.constant":
        root.register_buffer(op.symbol, _constant(op))
        nodes[op.result] = graph.get_attr(op.symbol)
        return
    target, args, kwargs = target_of(op)
    if target is None or not callable(target):
        raise MindError(f"'{op.name}' cannot be executed", op.loc)
    node = graph.call_function(target, tuple(from_attr(args, nodes)), from_attr(kwargs, nodes))
    if op.results:
        node.name = op.results[0].name + ("_tuple" if len(op.results) > 1 else "")
        _bind_results(graph, op, node, nodes)


def target_of(op: Operation) -> tuple[Any, list, dict]:
    """What an aten op calls, with its arguments and keyword arguments (attribute values)."""
    if is_collective(op):
        return collective_call(op)
    target = resolve(op.symbol) if op.name == "aten.call" else overload(op.name)
    return target, list(op.args), dict(op.attrs)


def aliased_results(op: Operation) -> list[int]:
    """The positions of the tensor results of aten op `op` whose memory may be an argument's:
    those its schema annotates (a view's `Tensor(a)`, an in-place op's `Tensor(a!)`, a split's
    `Tensor(a)[]`), and every one of a callable without a schema."""
    target = target_of(op)[0]
    tensors = [i for i, r in enumerate(op.results) if isinstance(r.type, TensorType)]
    if not isinstance(target, torch._ops.OpOverload):
        return tensors
    returns = target._schema.returns
    if len(returns) == 1 and isinstance(returns[0].type, torch.ListType):
        return tensors if returns[0].alias_info is not None else []
    return [i for i in tensors if i < len(returns) and returns[i].alias_info is not None]


def _bind_results(graph: torch.fx.Graph, op: Operation, node: torch.fx.Node, nodes: dict) -> None:
    if not _returns_sequence(node.target):
        nodes[op.result] = node
        return
    for i, result in enumerate(op.results):
        item = graph.call_function(operator.getitem, (node, i))
        item.name = result.name
        nodes[result] = item


def _returns_sequence(target: Any) -> bool:
    """Whether `target` returns a tuple or list (one IR result per element): an overload whose
    schema says so; never a plain Python callable (`operator.floordiv` on sizes)."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    returns = target._schema.returns
    return len(returns) != 1 or isinstance(returns[0].type, torch.ListType)


def _constant(op: Operation) -> torch.Tensor:
    t: TensorType = op.result.type
    data = torch.tensor(op.data, dtype=to_torch(t.dtype)).reshape(t.shape)
    return data.to(to_torch_device(t.device)) if t.device is not None else data
