"""mind's rules for gathers.

- take: torch's rule indexes the flattened tensor with the index as Python indexing does, which
  reads a 0-d index as a number (`.item()`): tracing stops there, so a graph that takes with a
  0-d index ran eagerly. Here the index is always a tensor index (`aten.index`), as the op
  means: the result has the index's shape, negative indices count from the end, and an index out
  of range is an error, as in eager.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return aten.index.Tensor(x.reshape(-1), [index])


#: op overload -> mind's rule
RULES = {aten.take.default: _take}
