"""mind's dtypes and devices as torch's, and back. The core is torch-free; this is where the
stages that run torch anyway (capture, lowering, the evaluator, the runtime) cross over."""

from __future__ import annotations

import torch
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DTYPES, Device, DType

_FROM_TORCH: dict[torch.dtype, DType] = {
    getattr(torch, d.torch_name): d for d in DTYPES.values() if hasattr(torch, d.torch_name)
}


def to_torch(dtype: DType) -> torch.dtype:
    return getattr(torch, dtype.torch_name)


def from_torch(dtype: torch.dtype) -> DType:
    if dtype not in _FROM_TORCH:
        raise MindError(f"mind has no dtype for {dtype}")
    return _FROM_TORCH[dtype]


def to_torch_device(device: Device) -> torch.device:
    return torch.device(str(device))


def from_torch_device(device: torch.device) -> Device:
    return Device(device.type, device.index)
