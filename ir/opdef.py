"""Op declarations, in the manner of xDSL's `operand_def`/`prop_def` and MLIR's ODS: an op class
lists its fields, each with a constraint, and reads them by name.

    class Load(Op):
        source = operand(TENSOR)                 # positional, an SSA value
        index = arg(INDEX | list_of(INDEX))     # positional, an attribute value
        mask = opt_attr(value(dtype_is(b8)))    # named, optional

`op.index` reads `op.args[1]`, `op.mask` reads `op.attrs.get("mask")`, and assigning to them
changes the op (keeping use lists). The fields, in order, are the op's declaration (`decl`): the
verifier checks every op against it, `mind-opt --list-ops` prints it, docs/IR.md is checked
against it. Positional fields print in the argument list, named ones in the attribute dict, so
declaring an op changes nothing in its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from .constraints import ANY, ANY_TYPE, Constraint, value
from .core import Block, Operation, Region
from .diagnostics import Location
from .types import Type

Verifier = Callable[[Operation], None]


class Field:
    """One declared part of an op; a descriptor on the op class."""

    kind: ClassVar[str] = ""

    def __init__(self, constraint: Constraint = ANY, optional: bool = False, name: str = ""):
        self.constraint = constraint
        self.optional = optional
        self.name = name
        self.position = 0

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, op: Operation | None, owner: type) -> Any:
        return self if op is None else self.get(op)

    def __set__(self, op: Operation, item: Any) -> None:
        raise AttributeError(f"'{self.name}' of '{op.name}' cannot be assigned")

    def get(self, op: Operation) -> Any:
        raise NotImplementedError

    @property
    def variadic(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{self.name}{'?' if self.optional else ''}: {self.constraint}"


class ArgField(Field):
    """A positional argument: `op.args[position]`; optional ones trail (ATen defaults)."""

    kind = "arg"

    def get(self, op: Operation) -> Any:
        args = op.args
        return args[self.position] if self.position < len(args) else None

    def __set__(self, op: Operation, item: Any) -> None:
        op.set_arg(self.position, item)


class VarArgField(ArgField):
    """The remaining positional arguments, each under the constraint: a tuple."""

    def get(self, op: Operation) -> tuple:
        return op.args[self.position :]

    def __set__(self, op: Operation, items: Any) -> None:
        op.args = (*op.args[: self.position], *items)

    @property
    def variadic(self) -> bool:
        return True

    def describe(self) -> str:
        return f"{self.name}: {self.constraint}..."


class AttrField(Field):
    """A named attribute: `op.attrs[name]` (None when an optional one is absent)."""

    kind = "attr"

    def get(self, op: Operation) -> Any:
        return op.attrs.get(self.name)

    def __set__(self, op: Operation, item: Any) -> None:
        op.set_attr(self.name, item)


class ResultField(Field):
    kind = "result"

    def get(self, op: Operation) -> Any:
        return op.results[self.position]


class VarResultField(ResultField):
    def get(self, op: Operation) -> list:
        return op.results[self.position :]

    @property
    def variadic(self) -> bool:
        return True

    def describe(self) -> str:
        return f"{self.name}: {self.constraint}..."


class RegionField(Field):
    """A region, read as its block (mind's regions hold one block)."""

    kind = "region"

    def get(self, op: Operation) -> Block:
        return op.regions[self.position].block

    def describe(self) -> str:
        return self.name


def operand(type_: Constraint = ANY_TYPE) -> ArgField:
    """A positional SSA value whose type satisfies `type_`."""
    return ArgField(value(type_))


def arg(constraint: Constraint = ANY) -> ArgField:
    """A positional attribute value (an index expression, an axis, ...)."""
    return ArgField(constraint)


def var_args(constraint: Constraint = ANY) -> VarArgField:
    return VarArgField(constraint)


def attr(constraint: Constraint = ANY) -> AttrField:
    return AttrField(constraint)


def opt_attr(constraint: Constraint = ANY) -> AttrField:
    return AttrField(constraint, optional=True)


def result(type_: Constraint = ANY_TYPE) -> ResultField:
    return ResultField(type_)


def var_results(type_: Constraint = ANY_TYPE) -> VarResultField:
    return VarResultField(type_)


def region() -> RegionField:
    return RegionField()


@dataclass(frozen=True)
class OpDecl:
    """An op's fields by kind, in declaration order."""

    args: tuple[ArgField, ...] = ()
    attrs: tuple[AttrField, ...] = ()
    results: tuple[ResultField, ...] = ()
    regions: tuple[RegionField, ...] = ()

    @staticmethod
    def of(fields: list[Field]) -> OpDecl:
        """Number the fields of each kind in order; a variadic one must come last of its kind."""
        groups: dict[str, list[Field]] = {"arg": [], "attr": [], "result": [], "region": []}
        for f in fields:
            kind = groups[f.kind]
            if kind and kind[-1].variadic:
                raise TypeError(f"field '{f.name}' follows the variadic '{kind[-1].name}'")
            f.position = len(kind)
            kind.append(f)
        return OpDecl(*(tuple(groups[k]) for k in ("arg", "attr", "result", "region")))

    @property
    def variadic_args(self) -> bool:
        return bool(self.args) and self.args[-1].variadic

    @cached_property
    def attr_names(self) -> dict[str, AttrField]:
        return {f.name: f for f in self.attrs}


#: names an op class may not use for a field: Operation's own attributes
_RESERVED = {"name", "args", "attrs", "results", "regions", "symbol", "loc", "parent", "operands"}


class Op(Operation):
    """Base of declared ops: the Field attributes of a subclass (and of its bases, first) are
    its declaration, `decl`."""

    decl: ClassVar[OpDecl] = OpDecl()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, Field] = {}
        for klass in reversed(cls.__mro__):
            fields.update({k: v for k, v in vars(klass).items() if isinstance(v, Field)})
        clash = _RESERVED & fields.keys()
        if clash:
            raise TypeError(f"{cls.__name__} declares reserved field names {sorted(clash)}")
        cls.decl = OpDecl.of(list(fields.values()))

    @classmethod
    def build(
        cls,
        name: str,
        *,
        results: list[Type] | tuple[Type, ...] = (),
        names: list[str] | None = None,
        regions: list[Region] | None = None,
        symbol: str | None = None,
        loc: Location | None = None,
        attrs: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """The op `name` (a name this class is registered under) with its fields given by name;
        attributes keep the order given, and an optional one given as None is left out (a
        required one keeps None, which its constraint may allow). `attrs` adds undeclared
        attributes (an ATen call's keyword arguments)."""
        args: list[Any] = []
        for f in cls.decl.args:
            if f.name in fields:
                item = fields.pop(f.name)
                args += list(item) if f.variadic else [item]
            elif not (f.optional or f.variadic):
                raise TypeError(f"{cls.__name__}.build('{name}') needs '{f.name}'")
        declared = cls.decl.attr_names
        unknown = [k for k in fields if k not in declared]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {unknown}")
        named = {k: v for k, v in fields.items() if v is not None or not declared[k].optional}
        return cls(
            name, args, {**(attrs or {}), **named}, list(results), names, regions, symbol, loc
        )


@dataclass(frozen=True)
class OpDef:
    """A registered op: its name, class and declaration, and what else the verifier checks.

    symbol: needs `@symbol`. signature: prints its entry block's arguments as `(%a: T, ...)`.
    own_results: its attributes and regions may name its own results (a scheduler node's stores
    and MemoryDeps name the buffers it writes). open_attrs: attributes beyond the declared ones
    are allowed (an ATen call's keyword arguments). terminator: the op its body must end with."""

    name: str
    decl: OpDecl = OpDecl()
    cls: type[Operation] = Operation
    symbol: bool = False
    signature: bool = False
    own_results: bool = False
    open_attrs: bool = False
    terminator: str | None = None
    verify: Verifier | None = None
    summary: str = ""
    #: extra words for --list-ops (ATen ops show their schema)
    notes: tuple[str, ...] = field(default=())

    @cached_property
    def arg_counts(self) -> tuple[tuple[ArgField, ...], ArgField | None, int, int | None]:
        """(fixed fields, the variadic one or None, fewest and most arguments): what the
        verifier checks an op's arguments against."""
        args = self.decl.args
        fixed = tuple(f for f in args if not f.variadic)
        variadic = args[-1] if args and args[-1].variadic else None
        lo = len([f for f in fixed if not f.optional])
        return fixed, variadic, lo, None if variadic else len(fixed)

    @cached_property
    def required_attrs(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.decl.attrs if not f.optional)

    def declaration(self) -> str:
        """The op's shape in one line, as `mind-opt --list-ops` prints it."""
        d = self.decl
        head = self.name + (" @symbol" if self.symbol else "")
        if self.signature:
            head += "(%arg: type, ...)"
        elif d.args:
            head += "(" + ", ".join(f.describe() for f in d.args) + ")"
        attrs = [f.describe() for f in d.attrs] + (["..."] if self.open_attrs else [])
        if attrs:
            head += " {" + ", ".join(attrs) + "}"
        if d.results:
            head += " : " + ", ".join(f.describe() for f in d.results)
        for r in d.regions:
            head += (
                " { " + r.describe() + (f" ... {self.terminator}" if self.terminator else "") + " }"
            )
        return head
