"""Helpers shared by the lowering families: type promotion, operands, dims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
from mind.analysis.loops import Index, broadcast_index, pvars  # noqa: F401  (re-exported)
from mind.dialects.torch_types import from_torch, to_torch
from mind.ir.core import Value
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import IntLike
from mind.ir.types import TensorType
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from . import Unsupported

KIND = ELEMENTWISE_TYPE_PROMOTION_KIND


def is_tensor(x: Any) -> bool:
    return isinstance(x, Value) and isinstance(x.type, TensorType)


def _example(x: Any) -> Any:
    """What torch's promotion rules need of an operand: a meta tensor of the right rank and
    dtype, or a Python number of the right kind."""
    if is_tensor(x):
        return torch.empty((1,) * x.type.rank, dtype=to_torch(x.type.dtype), device="meta")
    if isinstance(x, sympy.Expr):
        return 1 if x.is_integer else 1.0
    if isinstance(x, bool | int | float):
        return x
    raise Unsupported(f"operand {x!r}")


def promote(
    args: Sequence[Any], kind: ELEMENTWISE_TYPE_PROMOTION_KIND, compute: bool = True
) -> DType:
    """The dtype the math runs in (bf16/f16 upcast to f32), by torch's own rules; or, with
    `compute=False`, the result's."""
    examples = [_example(a) for a in args if a is not None]
    return from_torch(elementwise_dtypes(*examples, type_promotion_kind=kind)[0 if compute else 1])


def operand(b, x: Any, index: Sequence[IntLike], dtype: DType) -> Value:
    """Operand `x` at `index` as a body value of `dtype`: a (broadcast) load or a constant."""
    if is_tensor(x):
        return b.cast(b.load(x, index), dtype)
    return b.constant(x, dtype)


def norm_dim(dim: int, rank: int) -> int:
    """`dim` counted from 0, as torch wraps it: negative dims count from the end, and a 0-d
    tensor takes 0 or -1."""
    bound = max(rank, 1)
    if not isinstance(dim, int) or not -bound <= dim < bound:
        raise MindError(f"dim {dim} is out of range for a tensor of rank {rank}")
    return dim + bound if dim < 0 else dim


def norm_dims(dims: Sequence[int] | int | None, rank: int) -> list[int]:
    """Sorted, non-negative reduction dims; none or an empty list mean every dim."""
    if dims is None:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted({norm_dim(d, rank) for d in dims}) if dims else list(range(rank))
