"""mind's rules for scatters.

- masked_scatter: Inductor's rule, the two steps eager CUDA takes (each set element's place in
  `source` is the running count of the mask before it, then a gather from there where the mask
  is set). Inductor applies it only where its backend has a Triton scan; mind's kernels are
  Triton on every device, so it applies everywhere. As in Inductor, a source shorter than the
  mask's count is not checked (eager raises): the gather clamps to its last element.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _masked_scatter(x: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    x, mask = aten.broadcast_tensors([x, mask])
    place = mask.reshape(-1).cumsum(0) - 1
    flat_x, flat_mask, flat_source = (t.flatten() for t in (x, mask, source))
    taken = aten._unsafe_masked_index(flat_source, flat_mask, [place], 0)
    return torch.where(flat_mask, taken, flat_x).view(x.shape)


#: op overload -> mind's rule
RULES = {aten.masked_scatter.default: _masked_scatter}
