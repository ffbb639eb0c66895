"""Element types and devices as the IR knows them, without torch: the core parses, prints and
verifies IR with these alone. `mind.dialects.torch_types` converts to and from torch's objects
where torch is loaded anyway (capture, lowering, the evaluator, the runtime).

Names are the short ones of the text form (`f32`, `bf16`, `i64`, `b8`); the attribute names
follow torch's (`is_floating_point`, `itemsize`, ...) so code reads the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One element type. `kind`: "f" float, "i" signed int, "u" unsigned int, "b" bool,
    "c" complex; `torch_name` is the attribute of the `torch` module."""

    name: str
    torch_name: str
    itemsize: int
    kind: str

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_signed(self) -> bool:
        return self.kind in "fic"

    @property
    def bits(self) -> int:
        return 8 * self.itemsize


f16 = DType("f16", "float16", 2, "f")
bf16 = DType("bf16", "bfloat16", 2, "f")
f32 = DType("f32", "float32", 4, "f")
f64 = DType("f64", "float64", 8, "f")
i8 = DType("i8", "int8", 1, "i")
i16 = DType("i16", "int16", 2, "i")
i32 = DType("i32", "int32", 4, "i")
i64 = DType("i64", "int64", 8, "i")
u8 = DType("u8", "uint8", 1, "u")
u16 = DType("u16", "uint16", 2, "u")
u32 = DType("u32", "uint32", 4, "u")
u64 = DType("u64", "uint64", 8, "u")
b8 = DType("b8", "bool", 1, "b")
c32 = DType("c32", "complex32", 4, "c")
c64 = DType("c64", "complex64", 8, "c")
c128 = DType("c128", "complex128", 16, "c")
f8e4m3fn = DType("f8e4m3fn", "float8_e4m3fn", 1, "f")
f8e5m2 = DType("f8e5m2", "float8_e5m2", 1, "f")

#: every dtype by its name in IR text
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, b8, c32, c64, c128,
              f8e4m3fn, f8e5m2)
}  # fmt: skip


def lowest(dtype: DType) -> float | int | bool:
    """The smallest value of `dtype`: -inf for floats, the minimum for integers, False."""
    if dtype.kind == "b":
        return False
    if dtype.is_floating_point:
        return float("-inf")
    return -(1 << (dtype.bits - 1)) if dtype.is_signed else 0


def highest(dtype: DType) -> float | int | bool:
    """The largest value of `dtype`: inf for floats, the maximum for integers, True."""
    if dtype.kind == "b":
        return True
    if dtype.is_floating_point:
        return float("inf")
    return (1 << (dtype.bits - (1 if dtype.is_signed else 0))) - 1


def upcast(dtype: DType) -> DType:
    """The dtype math runs in: f16 and bf16 compute (and accumulate) in f32, as eager does."""
    return f32 if dtype in (f16, bf16) else dtype


def literal(value: float | int | bool, dtype: DType) -> float | int | bool:
    """`value` as a Python number of `dtype`'s kind (what a constant of that dtype holds); an
    integer wraps around into the dtype's range, as eager converts a scalar operand
    (`int8 * 200` multiplies by -56)."""
    if dtype.kind == "b":
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    span = 1 << dtype.bits
    wrapped = int(value) % span
    return wrapped - span if dtype.is_signed and wrapped >= span // 2 else wrapped


@dataclass(frozen=True)
class Device:
    """`cpu`, `cuda:0`: a device type and an optional index, printed as torch prints them."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return str(self)

    @staticmethod
    def parse(text: str) -> Device:
        kind, _, index = text.partition(":")
        return Device(kind, int(index) if index else None)
