"""The core IR: no dialect lives here, only the mechanism every dialect uses."""

from .attributes import PyCall, PyRef, format_attr
from .core import Block, Module, Operation, Region, Value, iter_values, map_values
from .diagnostics import Diagnostic, Location, MindError
from .dtypes import DTYPES, Device, DType
from .opdef import Op, OpDecl, OpDef
from .printer import Printer, print_module, print_op
from .registry import DIALECTS, Dialect, VerifyError, lookup_op, register_dialect
from .symbols import as_int_like, sym
from .types import (
    OpaqueType,
    ScalarType,
    SymType,
    TensorType,
    Type,
    contiguous_strides,
)
from .verifier import verify

__all__ = [
    "DIALECTS",
    "DTYPES",
    "Block",
    "DType",
    "Device",
    "Diagnostic",
    "Dialect",
    "Location",
    "MindError",
    "Module",
    "Op",
    "OpDecl",
    "OpDef",
    "OpaqueType",
    "Operation",
    "Printer",
    "PyCall",
    "PyRef",
    "Region",
    "ScalarType",
    "SymType",
    "TensorType",
    "Type",
    "Value",
    "VerifyError",
    "as_int_like",
    "contiguous_strides",
    "format_attr",
    "iter_values",
    "lookup_op",
    "map_values",
    "print_module",
    "print_op",
    "register_dialect",
    "sym",
    "verify",
]
