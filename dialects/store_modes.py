"""Store modes: how a scatter's write meets what its target holds. One row per mode, read by the
lowering (which scatter reduction it serves), the verifiers (its name, the dtypes Triton takes),
the evaluators (the torch reference) and the Triton emitter (the atomic it becomes).

A store without a mode overwrites (`tl.store`; with duplicate indices one write wins, as in
eager). A mode folds the stored value into the element atomically (Inductor's
`ops.store(..., mode="atomic_add")`), so duplicates in a scatter's index all count.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.ir import dtypes as dt
from mind.ir.dtypes import DType


@dataclass(frozen=True)
class StoreMode:
    name: str
    #: the scatter_reduce reduction it computes (`torch.Tensor.scatter_reduce_`'s name, which
    #: the evaluators call)
    reduce: str
    #: the triton.language function it emits
    triton: str
    #: the element dtypes Triton's atomic takes (bf16 on sm90 and later only)
    dtypes: frozenset[DType]


STORE_MODES: dict[str, StoreMode] = {
    m.name: m
    for m in [
        StoreMode(
            "atomic_add",
            "sum",
            "tl.atomic_add",
            frozenset({dt.f16, dt.bf16, dt.f32, dt.f64, dt.i32, dt.i64}),
        ),
    ]
}
#: the modes by the scatter reduction they compute
BY_REDUCE: dict[str, StoreMode] = {m.reduce: m for m in STORE_MODES.values()}
