"""mind's rule for `embedding_dense_backward` in 16-bit floats: the table's gradient summed in f32
over the rows the indices touch, not over the whole table.

torch's rule (Inductor's too) accumulates into an f32 table of `num_weights` rows, then casts all
of it to the gradient's dtype. For a language model's vocabulary that is most of the work: Llama's
32000 x 1024 bf16 table with 2048 tokens writes 131 MB of f32 zeros and reads them back in the
cast (with its 65 MB of bf16), about 100 us of an H100, for 2048 rows of sums. This rule sums in
f32 into a buffer of one row per index, and writes each sum, rounded once, into a table of zeros
in the gradient's dtype: the same sums, each rounded once, as torch's rule gives.

- `slot[t]`: a position holding the same index as position t, the same for all of them (a plain
  scatter of positions into a table of `num_weights` integers: one duplicate wins, any serves);
- `sums[slot[t]] += grad[t]` in f32 (atomic adds, as torch's rule does into the table);
- `out[index[t]] = sums[slot[t]]`, rounded: duplicates write the same value.

Indices out of range and `padding_idx` contribute nothing, as in torch's rule. It applies where
the gradient is f16 or bf16 and there are fewer indices than rows (otherwise the dense table is
no more work; with dynamic shapes, a guard on the sizes), without `scale_grad_by_freq`; torch's
rule does the rest.
"""

from __future__ import annotations

import torch
from torch._decomp.decompositions import embedding_dense_backward as torch_rule
from torch.fx.experimental.symbolic_shapes import guard_or_false

aten = torch.ops.aten

#: gradients summed in f32 and rounded to their own dtype at the end
_NARROW = (torch.float16, torch.bfloat16)


def _embedding_dense_backward(
    grad_output: torch.Tensor,
    indices: torch.Tensor,
    num_weights: int,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> torch.Tensor:
    count = indices.numel()
    if (
        scale_grad_by_freq
        or grad_output.dtype not in _NARROW
        or not guard_or_false(count < num_weights)
    ):
        return torch_rule(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    row = grad_output.shape[indices.ndim :]
    flat = indices.reshape(count).to(torch.long)
    keep = (flat >= 0) & (flat < num_weights) & (flat != padding_idx)
    flat = torch.where(keep, flat, 0)  # a dropped index adds zeros to row 0's sum
    grad = grad_output.reshape(count, *row).to(torch.float32)
    grad = torch.where(keep.view(count, *(1,) * len(row)), grad, 0.0)
    positions = torch.arange(count, device=flat.device)
    slots = aten._unsafe_index_put(flat.new_zeros(num_weights), [flat], positions)
    slot = aten._unsafe_index(slots, [flat])
    sums = aten._unsafe_index_put(grad.new_zeros(count, *row), [slot], grad, accumulate=True)
    out = grad_output.new_zeros(num_weights, *row)
    return aten._unsafe_index_put(out, [flat], aten._unsafe_index(sums, [slot]).to(out.dtype))


#: op overload -> mind's rule
RULES = {aten.embedding_dense_backward.default: _embedding_dense_backward}
