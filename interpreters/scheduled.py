"""A reference interpreter for the scheduled dialect: runs a `scheduled.graph` on tensors, the
ground truth that schedule, fuse, merge-loops and online-softmax are checked against.

A node's body runs over its whole iteration at once, its loop variables broadcastable aranges
(as the loops interpreter runs a body): `reduction` reduces the r dims, leaving one value per x
position, `scan` and `sort` run along the r dims (flattened), keeping them, and `store`
scatters into the node's buffers at their flat offsets. Calls, constants,
reinterprets and collectives run as in the loops interpreter.
"""

from __future__ import annotations

import math

import torch
from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scheduled import Node, Reduction, Scan, Sort, Store
from mind.dialects.torch_types import to_torch
from mind.ir.core import Operation

from .loops import (
    MEMORY_OPS,
    Body,
    Env,
    flat_memory,
    grid,
    index_value,
    indirect_bindings,
    reduce_last,
    run_graph,
    scan_dim,
    scatter_into,
    sort_dim,
)


class NodeBody(Body):
    """A scheduler node's body over its x and r loops."""

    def __init__(self, env: Env, xs: list[int], rs: list[int]):
        super().__init__(env, grid(xs + rs))
        self.xs, self.rs = xs, rs

    def reduction(self, op: Reduction) -> None:
        xs, rs = self.xs, self.rs
        x = torch.broadcast_to(self.values[op.value], xs + rs).reshape(*xs, math.prod(rs))
        dtype = op.results[0].type.dtype
        family = REDUCTIONS[op.reduction_type].family
        if family in _SEVERAL:
            out = _SEVERAL[family](x, dtype)
        else:
            out = [reduce_last(op.reduction_type, x, dtype)]
        for result, value in zip(op.results, out):
            self.values[result] = value.reshape(*xs, *[1] * len(rs))

    def row(self, op: Scan | Sort) -> torch.Tensor:
        """The value as rows: the x dims, then the r dims flattened into one."""
        xs, rs = self.xs, self.rs
        return torch.broadcast_to(self.values[op.value], xs + rs).reshape(*xs, math.prod(rs))

    def scan(self, op: Scan) -> torch.Tensor:
        out = scan_dim(op.scan_type, self.row(op), -1, op.result.type.dtype)
        return out.reshape(self.xs + self.rs)

    def sort(self, op: Sort) -> None:
        for result, value in zip(op.results, sort_dim(self.row(op), -1, op.descending)):
            self.values[result] = value.reshape(self.xs + self.rs)

    def store(self, op: Store) -> None:
        offset = index_value(op.index, indirect_bindings(self.grid, op, self.values))
        scatter_into(flat_memory(self.env[op.buffer]), offset, self.values[op.value], op.mode)


def _online_softmax(x: torch.Tensor, dtype) -> list[torch.Tensor]:
    """A row's max and its sum of exp(v - max) (0 for a row of -inf)."""
    top = reduce_last("max", x, dtype)
    lanes = torch.where(top[..., None] == float("-inf"), 0.0, (x - top[..., None]).exp())
    return [top, reduce_last("sum", lanes, dtype)]


def _welford(x: torch.Tensor, dtype) -> list[torch.Tensor]:
    """A row's mean and its sum of squared deviations from it."""
    mean = reduce_last("welford", x, dtype)
    return [mean, reduce_last("sum", (x - mean[..., None]) ** 2, dtype)]


#: the kinds that give several values: family -> (row tensor, dtype) -> the values
_SEVERAL = {"online_softmax": _online_softmax, "welford": _welford}


NodeBody.OPS = {
    **Body.OPS,
    "reduction": NodeBody.reduction,
    "scan": NodeBody.scan,
    "sort": NodeBody.sort,
    "store": NodeBody.store,
}


def _node(op: Node, env: Env) -> list[torch.Tensor]:
    xs, rs = ([int(s) for s in sizes] for sizes in op.sizes)
    buffers = {
        r: torch.empty_strided(r.type.shape, r.type.strides, dtype=to_torch(r.type.dtype))
        for r in op.results
    }
    if op.updates is not None:  # its one result is that buffer, updated in place
        buffers = {op.results[0]: env[op.updates]}
    body = NodeBody({**env, **buffers}, xs, rs)
    for inner in op.body.ops:
        body.eval(inner)
    return list(buffers.values())


NODES = {"node": _node, **MEMORY_OPS}


def evaluate(graph_op: Operation, inputs: list[torch.Tensor]) -> list:
    """Run a `scheduled.graph` on `inputs`; the values of its `scheduled.output`, in order."""
    return run_graph(graph_op, inputs, NODES)
