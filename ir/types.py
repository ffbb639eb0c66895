"""Types in PyTorch's own notation: `f32[4, 128][128, 1]cuda:0`, scalars `f32`, `sym(s0)`."""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import Device, DType
from .symbols import IntLike, format_expr


class Type:
    """Base of all types; subclasses are frozen dataclasses that print themselves."""


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: DType

    def __str__(self) -> str:
        return self.dtype.name


@dataclass(frozen=True)
class TensorType(Type):
    """Sizes are ints or sympy expressions; strides and device are None where a stage does not know them."""

    dtype: DType
    shape: tuple[IntLike, ...]
    strides: tuple[IntLike, ...] | None = None
    device: Device | None = None

    def __str__(self) -> str:
        text = f"{self.dtype.name}[{', '.join(map(format_expr, self.shape))}]"
        if self.strides is not None:
            text += f"[{', '.join(map(format_expr, self.strides))}]"
        if self.device is not None:
            text += str(self.device)
        return text

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class SymType(Type):
    """A symbolic integer (a SymInt) whose value is the expression `expr`."""

    expr: IntLike

    def __str__(self) -> str:
        return f"sym({format_expr(self.expr)})"


@dataclass(frozen=True)
class OpaqueType(Type):
    """A value the stage does not model (a Python object, a tuple); printed `!name`."""

    name: str

    def __str__(self) -> str:
        return f"!{self.name}"


def size_symbols(t: Type) -> set[str]:
    """The names of the size symbols a type holds (in its sizes and strides, or its expression)."""
    exprs = [t.expr] if isinstance(t, SymType) else []
    if isinstance(t, TensorType):
        exprs = [*t.shape, *(t.strides or ())]
    return {s.name for e in exprs if not isinstance(e, int) for s in e.free_symbols}


def contiguous_strides(shape: tuple[IntLike, ...]) -> tuple[IntLike, ...]:
    strides: list[IntLike] = []
    running: IntLike = 1
    for size in reversed(shape):
        strides.append(running)
        running = running * size
    return tuple(reversed(strides))
