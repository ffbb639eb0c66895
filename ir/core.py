"""The IR's data structures: SSA values, operations, blocks, regions and the module.

An operation's positional `args` and named `attrs` hold plain attribute values (ints, floats,
strings, lists, dtypes, sympy expressions, ...) and `Value`s, nested anywhere; its operands are
the values found there, in order. That one shape serves every dialect: an ATen call
`aten.sum.dim_IntList(%mul, [-1])` and a loop-body load `loops.load(%arg0_1, 128*p0 + p1)` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .diagnostics import Location
from .types import Type


class Value:
    """An SSA value: an operation's result or a block argument, named as torch named it."""

    def __init__(self, name: str, type: Type, owner: Operation | Block | None = None):
        self.name = name
        self.type = type
        self.owner = owner

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


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


def iter_values(item: Any) -> Iterator[Value]:
    if isinstance(item, Value):
        yield item
    elif isinstance(item, list | tuple):
        for x in item:
            yield from iter_values(x)
    elif isinstance(item, dict):
        for x in item.values():
            yield from iter_values(x)


class Operation:
    """One operation. `symbol` is the optional `@name` after the op name (a graph's or kernel's
    name, an fx call target)."""

    def __init__(
        self,
        name: str,
        args: list[Any] | None = None,
        attrs: dict[str, Any] | None = None,
        result_types: list[Type] | None = None,
        result_names: list[str] | None = None,
        regions: list[Region] | None = None,
        symbol: str | None = None,
        loc: Location | None = None,
    ):
        self.name = name
        self.args = list(args or [])
        self.attrs = dict(attrs or {})
        types = list(result_types or [])
        names = list(result_names or [f"{name.rsplit('.', 1)[-1]}_{i}" for i in range(len(types))])
        self.results = [Value(n, t, self) for n, t in zip(names, types)]
        self.regions: list[Region] = []
        for region in regions or []:
            self.add_region(region)
        self.symbol = symbol
        self.loc = loc
        self.parent: Block | None = None

    # -- structure -------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def operands(self) -> list[Value]:
        return [*iter_values(self.args), *iter_values(self.attrs)]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def body(self) -> Block:
        """The entry block of the first region, where most ops with a region keep their ops."""
        return self.regions[0].block

    def add_region(self, region: Region) -> Region:
        region.parent = self
        self.regions.append(region)
        return region

    def replace_values(self, fn: Callable[[Value], Any]) -> None:
        self.args = map_values(self.args, fn)
        self.attrs = map_values(self.attrs, fn)

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in textual order."""
        yield self
        for region in self.regions:
            for op in region.block.ops:
                yield from op.walk()

    def erase(self) -> None:
        assert self.parent is not None
        self.parent.ops.remove(self)
        self.parent = None

    def __repr__(self) -> str:
        from .printer import print_op

        return print_op(self)


class Block:
    """A straight-line list of operations with optional arguments (a graph's inputs)."""

    def __init__(self, args: list[Value] | None = None, ops: list[Operation] | None = None):
        self.args: list[Value] = []
        for arg in args or []:
            self.add_arg(arg)
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        for op in ops or []:
            self.append(op)

    def add_arg(self, value: Value) -> Value:
        value.owner = self
        self.args.append(value)
        return value

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(self.ops.index(anchor), op)
        return op

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Region:
    """A region holds one block: mind's graphs and loop bodies have no control flow."""

    def __init__(self, block: Block | None = None):
        self.block = block or Block()
        self.block.parent = self
        self.parent: Operation | None = None


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

    def lookup(self, symbol: str) -> Operation | None:
        return next((op for op in self.ops if op.symbol == symbol), None)
