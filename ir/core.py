"""The IR's data structures: SSA values with their users, operations, blocks, regions, the module,
and the rewrite primitives passes are written with (clone with a value map, replace all uses,
erase).

An operation's positional `args` and named `attrs` hold plain attribute values (ints, floats,
strings, lists, dtypes, sympy expressions, ...) and `Value`s, nested anywhere; its operands are
the values found there, in order. That one shape serves every dialect: an ATen call
`aten.sum.dim_IntList(%mul, [-1])` and a loop-body load `loops.load(%arg0_1, 128*p0 + p1)` alike.
Each dialect declares what its ops hold (ir/opdef.py) and reads it through named accessors.

`args` is a tuple and `attrs` a read-only mapping: every change goes through the op (a field
accessor, `set_arg`, `set_attr`, `replace_values`), which keeps each value's `users` exact.

Every change also counts as an edit (`edits()`): what changes an op, a block's list, a region's
block or a value's name or type. A pass manager that sees no edit over a pass knows the pass
changed nothing, and does not verify the IR again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

from .diagnostics import Location
from .types import Type

#: how many edits IR has had in this process (see `edits`)
_edits = 0


def edits() -> int:
    """A count of the edits made to any IR in this process: unchanged between two reads, no IR
    changed (an op made counts too: it joins its operands' users)."""
    return _edits


def _edited() -> None:
    global _edits
    _edits += 1


class Value:
    """An SSA value: an operation's result or a block argument, named as torch named it.
    `users` are the ops that hold it in their args or attrs (an ordered set)."""

    __slots__ = ("name", "type", "owner", "users")
    #: the fields whose change is an edit of the IR
    _EDITS = frozenset(("name", "type"))

    def __init__(self, name: str, type: Type, owner: Operation | Block | None = None):
        # (through the slots themselves: a new value edits nothing, and `__setattr__` would
        # make a value four times as slow to make)
        _SET_NAME(self, name)
        _SET_TYPE(self, type)
        _SET_OWNER(self, owner)
        _SET_USERS(self, {})

    def __setattr__(self, key: str, value: Any) -> None:
        object.__setattr__(self, key, value)
        if key in Value._EDITS:
            _edited()

    def replace_all_uses_with(self, new: Any) -> None:
        """Every user holds `new` (a value or an attribute value) where it held this value."""
        for user in list(self.users):
            user.replace_uses(self, new)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


_SET_NAME, _SET_TYPE, _SET_OWNER, _SET_USERS = (
    getattr(Value, slot).__set__ for slot in Value.__slots__
)


def fresh_name(base: str, taken: Callable[[str], bool]) -> str:
    """`base`, else `base_1`, `base_2`, ...: the first name `taken` says is free."""
    name, n = base, 0
    while taken(name):
        n += 1
        name = f"{base}_{n}"
    return name


def map_values(item: Any, fn: Callable[[Value], Any]) -> Any:
    """Rebuild a nested attribute structure with every Value replaced by fn(value)."""
    if isinstance(item, Value):
        return fn(item)
    if isinstance(item, list):
        return [map_values(x, fn) for x in item]
    if isinstance(item, tuple):
        return tuple(map_values(x, fn) for x in item)
    if isinstance(item, dict):
        return {k: map_values(v, fn) for k, v in item.items()}
    return item


_NESTED = (list, tuple, dict)


def _replaced(item: Any, old: Value, new: Any) -> Any:
    """`item` with `new` wherever it holds `old` (map_values for one value, without a call per
    plain element: an output op holds hundreds of values, and fusion renames them one by one)."""
    if item is old:
        return new
    if isinstance(item, dict):
        return {k: _replaced(v, old, new) for k, v in item.items()}
    if isinstance(item, list | tuple):
        out = [new if x is old else _replaced(x, old, new) if isinstance(x, _NESTED) else x
               for x in item]  # fmt: skip
        return out if isinstance(item, list) else tuple(out)
    return item


def iter_values(item: Any) -> Iterator[Value]:
    if isinstance(item, Value):
        yield item
    elif isinstance(item, list | tuple):
        for x in item:
            yield from iter_values(x)
    elif isinstance(item, dict):
        for x in item.values():
            yield from iter_values(x)


def _plain(item: Any) -> bool:
    """Holds no value (an int, an index expression, a string, ...), as far as a glance tells."""
    return not isinstance(item, Value | list | tuple | dict)


def _collect(item: Any, out: list[Value]) -> None:
    """iter_values into a list, without generators (it runs on every op change)."""
    if isinstance(item, Value):
        out.append(item)
    elif isinstance(item, list | tuple):
        for x in item:
            if isinstance(x, Value):
                out.append(x)
            elif isinstance(x, list | tuple | dict):
                _collect(x, out)
    elif isinstance(item, dict):
        for x in item.values():
            _collect(x, out)


#: op name -> the Operation subclass declaring it; filled by the registry (ir/registry.py)
OpClassResolver = Callable[[str], type["Operation"]]


class Attrs(dict):
    """An op's attributes: a dict that refuses changes made around the op (they would bypass
    its use lists); the op itself changes it with dict's own methods."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("an op's attributes change through the op: set_attr, del_attr, fields")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]


class Operation:
    """One operation. `symbol` is the optional `@name` after the op name (a graph's or kernel's
    name, an fx call target). `Operation(name, ...)` builds the class the op's dialect declares
    for `name`, so an op has its named accessors however it was made (parser, pass, clone)."""

    #: set by the registry: finds (and loads) the class for an op name
    resolve_class: ClassVar[OpClassResolver | None] = None

    def __new__(cls, name: str, *args: Any, **kwargs: Any) -> Operation:
        if cls is Operation and Operation.resolve_class is not None:
            cls = Operation.resolve_class(name)
        return super().__new__(cls)

    def __init__(
        self,
        name: str,
        args: list[Any] | tuple[Any, ...] | None = None,
        attrs: Mapping[str, Any] | None = None,
        result_types: list[Type] | None = None,
        result_names: list[str] | None = None,
        regions: list[Region] | None = None,
        symbol: str | None = None,
        loc: Location | None = None,
    ):
        self.name = name
        self._args: tuple[Any, ...] = tuple(args or ())
        self._attrs = Attrs(attrs or {})
        self._operands: tuple[Value, ...] = ()
        self._link()
        types = list(result_types or [])
        names = list(result_names or [f"{name.rsplit('.', 1)[-1]}_{i}" for i in range(len(types))])
        self.results = [Value(n, t, self) for n, t in zip(names, types)]
        self.regions: list[Region] = []
        for region in regions or []:
            self.add_region(region)
        self._symbol = symbol
        self.loc = loc
        self.parent: Block | None = None

    @property
    def symbol(self) -> str | None:
        return self._symbol

    @symbol.setter
    def symbol(self, symbol: str | None) -> None:
        self._symbol = symbol
        _edited()

    # -- operands and use lists --------------------------------------------------------------
    def _link(self) -> None:
        _edited()
        found: list[Value] = []
        _collect(self._args, found)
        if self._attrs:
            _collect(self._attrs, found)
        self._operands = tuple(found)
        for value in found:
            value.users[self] = None

    def _unlink(self) -> None:
        for value in self._operands:
            value.users.pop(self, None)
        self._operands = ()

    @property
    def args(self) -> tuple[Any, ...]:
        return self._args

    @args.setter
    def args(self, args: list[Any] | tuple[Any, ...]) -> None:
        self._unlink()
        self._args = tuple(args)
        self._link()

    @property
    def attrs(self) -> Mapping[str, Any]:
        """Read-only: change attributes with `set_attr`, `del_attr` or the op's accessors."""
        return self._attrs

    @attrs.setter
    def attrs(self, attrs: Mapping[str, Any]) -> None:
        self._unlink()
        self._attrs = Attrs(attrs)
        self._link()

    def set_arg(self, index: int, value: Any) -> None:
        args = list(self._args)
        old, args[index] = args[index], value
        if _plain(old) and _plain(value):  # no value comes or goes: the users stay
            self._args = tuple(args)
            _edited()
        else:
            self.args = args

    def set_attr(self, key: str, value: Any) -> None:
        if _plain(value) and _plain(self._attrs.get(key)):
            dict.__setitem__(self._attrs, key, value)
            _edited()
            return
        self._unlink()
        dict.__setitem__(self._attrs, key, value)
        self._link()

    def del_attr(self, key: str) -> None:
        if key in self._attrs:
            self._unlink()
            dict.__delitem__(self._attrs, key)
            self._link()

    @property
    def operands(self) -> tuple[Value, ...]:
        """The values in args then attrs, in order (repeats included)."""
        return self._operands

    def replace_uses(self, old: Value, new: Any) -> None:
        """Hold `new` (a value or an attribute value) wherever this op holds `old`."""
        self._args = _replaced(self._args, old, new)
        self._attrs = Attrs(_replaced(dict(self._attrs), old, new))
        if not isinstance(new, Value):
            self._unlink()
            self._link()
            return
        _edited()
        self._operands = tuple(new if v is old else v for v in self._operands)
        old.users.pop(self, None)
        new.users[self] = None

    def replace_values(self, fn: Callable[[Value], Any]) -> None:
        self._unlink()
        self._args = map_values(self._args, fn)
        self._attrs = Attrs(map_values(dict(self._attrs), fn))
        self._link()

    # -- structure -------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def kind(self) -> str:
        """The op's name without its dialect (`load` for `scheduled.load`)."""
        return self.name.split(".", 1)[1]

    @property
    def body(self) -> Block:
        """The entry block of the first region, where most ops with a region keep their ops."""
        return self.regions[0].block

    def add_region(self, region: Region) -> Region:
        _edited()
        region.parent = self
        self.regions.append(region)
        return region

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in textual order."""
        yield self
        for region in self.regions:
            for op in region.block.ops:
                yield from op.walk()

    @property
    def parent_op(self) -> Operation | None:
        """The op whose region holds this one (a node's, for an op of its body), or None."""
        region = self.parent.parent if self.parent is not None else None
        return region.parent if region is not None else None

    def ancestor_in(self, block: Block) -> Operation | None:
        """The op of `block` that is this op or holds it in a region, or None."""
        op: Operation | None = self
        while op is not None and op.parent is not block:
            op = op.parent_op
        return op

    # -- rewriting -------------------------------------------------------------------------
    def clone(self, vmap: dict[Value, Any] | None = None, name: str | None = None) -> Operation:
        """A copy (regions included) with operands mapped through `vmap` (values it lacks stay)
        and named `name` if given; maps this op's results (and block arguments) to the copy's,
        in `vmap`, so that cloning ops in order rewires them."""
        vmap = {} if vmap is None else vmap
        new = Operation(
            name or self.name,
            result_types=[r.type for r in self.results],
            result_names=[r.name for r in self.results],
            symbol=self.symbol,
            loc=self.loc,
        )
        vmap.update(zip(self.results, new.results))  # an op may name its own results
        for region in self.regions:
            new.add_region(region.clone(vmap))

        def remap(v: Value) -> Any:
            return vmap.get(v, v)

        new._args = map_values(self._args, remap)
        new._attrs = Attrs(map_values(dict(self._attrs), remap))
        new._link()
        return new

    def replace_by(self, values: list[Any]) -> None:
        """Every use of each result becomes the matching value, then this op is erased."""
        for result, value in zip(self.results, values, strict=True):
            result.replace_all_uses_with(value)
        self.erase()

    def erase(self) -> None:
        """Detach from the block and drop every operand reference (nested ops' too). Its results
        must have no users left that stay in the IR (the verifier would report them)."""
        if self.parent is not None:
            self.parent.remove(self)
        self.discard()

    def discard(self) -> None:
        """Take this op (detached, or part of IR that is done with) apart: drop its operand
        references and every link up from its results, regions and nested ops, so that what is
        left refers to nothing that refers back. Python then frees it as soon as the last
        reference goes, instead of leaving it to the cyclic garbage collector, whose full
        collections scan every object of the process (torch's too): thousands of ops per pass
        made those collections a growing share of compiling. Results keep their users (a pass
        may move them on after erasing); a nested op that was moved to another block is left."""
        ops = [self]
        while ops:
            op = ops.pop()
            op._unlink()
            op.parent = None
            for value in op.results:
                value.owner = None
            for region in op.regions:
                block = region.block
                region.parent = block.parent = None
                for arg in block.args:
                    arg.owner = None
                ops.extend(o for o in block.ops if o.parent is block)

    def __repr__(self) -> str:
        from .printer import print_op

        return print_op(self)


class Block:
    """A straight-line list of operations with optional arguments (a graph's inputs). Change the
    list through the methods here, which keep `parent` links."""

    def __init__(self, args: list[Value] | None = None, ops: list[Operation] | None = None):
        self.args: list[Value] = []
        for arg in args or []:
            self.add_arg(arg)
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        for op in ops or []:
            self.append(op)

    def add_arg(self, value: Value) -> Value:
        _edited()
        value.owner = self
        self.args.append(value)
        return value

    def append(self, op: Operation) -> Operation:
        _edited()
        op.parent = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        _edited()
        op.parent = self
        self.ops.insert(self.ops.index(anchor), op)
        return op

    def insert_after(self, anchor: Operation, op: Operation) -> Operation:
        _edited()
        op.parent = self
        self.ops.insert(self.ops.index(anchor) + 1, op)
        return op

    def remove(self, op: Operation) -> None:
        """Take `op` out of the block without touching its operands (see Operation.erase)."""
        _edited()
        self.ops.remove(op)
        op.parent = None

    def erase_ops(self, ops: Iterable[Operation]) -> None:
        """Erase many of this block's ops (Operation.erase) in one pass over the block, not a
        search of it per op."""
        _edited()
        gone = set(ops)
        self.ops[:] = [op for op in self.ops if op not in gone]
        for op in gone:
            op.parent = None
            op.discard()

    def reorder(self, ops: list[Operation], start: int = 0) -> None:
        """The same ops in another order (those from `start` on, as many as `ops` holds)."""
        _edited()
        stop = start + len(ops)
        assert stop <= len(self.ops) and set(ops) == set(self.ops[start:stop])
        self.ops[start:stop] = ops

    def clone(self, vmap: dict[Value, Any]) -> Block:
        args = [Value(a.name, a.type) for a in self.args]
        vmap.update(zip(self.args, args))
        return Block(args, [op.clone(vmap) for op in self.ops])

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Region:
    """A region holds one block: mind's graphs and loop bodies have no control flow."""

    def __init__(self, block: Block | None = None):
        self.parent: Operation | None = None
        self.block = block or Block()

    @property
    def block(self) -> Block:
        return self._block

    @block.setter
    def block(self, block: Block) -> None:
        _edited()
        block.parent = self
        self._block = block

    def clone(self, vmap: dict[Value, Any]) -> Region:
        return Region(self.block.clone(vmap))


class Module:
    """A parsed file or a compiled program: top-level operations (graphs, kernels) in order."""

    def __init__(self, ops: list[Operation] | None = None):
        self.block = Block(ops=ops)

    @property
    def ops(self) -> list[Operation]:
        return self.block.ops

    def walk(self) -> Iterator[Operation]:
        for op in self.ops:
            yield from op.walk()

    @property
    def dialect(self) -> str | None:
        """The stage the module is at: the dialect of its top-level operations."""
        dialects = {op.dialect for op in self.ops}
        return dialects.pop() if len(dialects) == 1 else None

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)

    def discard(self, keep: Iterable[Operation] = ()) -> None:
        """Take apart the ops of a module that is done with (Operation.discard), but `keep`."""
        kept = set(keep)
        for op in self.ops:
            if op not in kept:
                op.discard()

    def lookup(self, symbol: str) -> Operation | None:
        return next((op for op in self.ops if op.symbol == symbol), None)
