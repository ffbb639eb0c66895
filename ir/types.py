"""Types in PyTorch's own notation: `f32[4, 128][128, 1]cuda:0`, scalars `f32`, `sym(s0)`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .symbols import IntLike, format_expr

#: short dtype names as torch prints them in graph annotations
DTYPES: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "b8": torch.bool,
    "c64": torch.complex64,
    "c128": torch.complex128,
    "f8e4m3fn": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
    "c32": torch.complex32,
    "u16": torch.uint16,
    "u32": torch.uint32,
    "u64": torch.uint64,
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES[dtype]


class Type:
    """Base of all types; subclasses are frozen dataclasses that print themselves."""


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: torch.dtype

    def __str__(self) -> str:
        return dtype_name(self.dtype)


@dataclass(frozen=True)
class TensorType(Type):
    """Sizes are ints or sympy expressions; strides and device are None where a stage does not know them."""

    dtype: torch.dtype
    shape: tuple[IntLike, ...]
    strides: tuple[IntLike, ...] | None = None
    device: torch.device | None = None

    def __str__(self) -> str:
        text = f"{dtype_name(self.dtype)}[{', '.join(map(format_expr, self.shape))}]"
        if self.strides is not None:
            text += f"[{', '.join(map(format_expr, self.strides))}]"
        if self.device is not None:
            text += format_device(self.device)
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


def format_device(device: torch.device) -> str:
    return str(device)


def contiguous_strides(shape: tuple[IntLike, ...]) -> tuple[IntLike, ...]:
    strides: list[IntLike] = []
    running: IntLike = 1
    for size in reversed(shape):
        strides.append(running)
        running = running * size
    return tuple(reversed(strides))
