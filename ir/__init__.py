"""The core IR: no dialect lives here, only the mechanism every dialect uses."""

from .attributes import PyCall, PyRef, format_attr
from .core import Block, Module, Operation, Region, Value, iter_values, map_values
from .diagnostics import Diagnostic, Location, MindError
from .printer import Printer, print_module, print_op
from .registry import DIALECTS, Dialect, OpDef, VerifyError, lookup_op, register_dialect
from .symbols import as_int_like, sym
from .types import (
    DTYPES,
    OpaqueType,
    ScalarType,
    SymType,
    TensorType,
    Type,
    contiguous_strides,
    dtype_name,
)
from .verifier import verify

__all__ = [
    "DIALECTS",
    "DTYPES",
    "Block",
    "Diagnostic",
    "Dialect",
    "Location",
    "MindError",
    "Module",
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
    "dtype_name",
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
