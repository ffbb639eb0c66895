"""The phases of a scheduled node's body: which ops run once per row and which along r, and how
many reductions each depends on. A looped kernel runs one r-loop per phase that reads along r."""

from __future__ import annotations

from collections.abc import Container

import sympy
from mind.analysis.deps import INDEXED, equal
from mind.dialects.scheduled import KEEPS_ROW, Load, Reduction, Store
from mind.ir.core import Operation, Value


class Phases:
    """Each body op's phase (how many reductions it depends on) and whether it varies along r."""

    def __init__(self, node: Operation):
        self.ops = node.body.ops
        nx = len(node.sizes[0])
        self.level: dict[Operation, int] = {}
        self.has_r: dict[Operation, bool] = {}
        self.defs: dict[Value, Operation] = {}
        info: dict[Value, tuple[int, bool]] = {}
        for op in self.ops:
            deps = [v for v in op.operands if v in info]
            level = max((info[v][0] for v in deps), default=0)
            self.level[op] = level
            # a scan or sort gives a value per r position, even of a value the same along r
            self.has_r[op] = any(info[v][1] for v in deps) or _reads_r(op, nx)
            self.has_r[op] |= isinstance(op, KEEPS_ROW)
            reduction = isinstance(op, Reduction)
            for result in op.results:
                info[result] = (level + 1, False) if reduction else (level, self.has_r[op])
                self.defs[result] = op
        self._store_after_reads()
        self.count = max(self.level.values(), default=0) + 1

    def _store_after_reads(self) -> None:
        """A store into a buffer the node also loads (an input it overwrites) moves to the last
        phase that loads it: a looped kernel loads again in each phase's r-loop, and must not
        read what an earlier loop stored. (In one loop, each element is loaded before the store
        at its index; the verifier refuses a load of the buffer at any other index, so such a
        load varies along r as the store does.)"""
        stored = {op.buffer for op in self.ops if isinstance(op, Store)}
        if not any(isinstance(op, Load) and op.source in stored for op in self.ops):
            return  # (most nodes: nothing to walk)
        last: dict[Operation, int] = {}  # the last phase whose r-loop computes each op
        for op in reversed(self.ops):
            users = [u for r in op.results for u in r.users if u in self.level]
            last[op] = max(
                [self.level[op]]
                + [self.level[u] if isinstance(u, Reduction) else last[u] for u in users]
            )
        read: dict[Value, int] = {}
        for op in self.ops:
            if isinstance(op, Load) and self.has_r[op]:
                read[op.source] = max(read.get(op.source, 0), last[op])
        for op in self.ops:
            if isinstance(op, Store) and op.buffer in read:
                self.level[op] = max(self.level[op], read[op.buffer])

    def x_ops(self, k: int) -> list[Operation]:
        """Phase k's work that is one value per row: computed outside any r-loop."""
        return [
            op
            for op in self.ops
            if self.level[op] == k and not self.has_r[op] and not isinstance(op, Reduction)
        ]

    def r_work(self, k: int) -> tuple[list[Operation], list[Operation]]:
        reductions = [op for op in self.ops if isinstance(op, Reduction) and self.level[op] == k]
        stores = [
            op
            for op in self.ops
            if isinstance(op, Store) and self.has_r[op] and self.level[op] == k
        ]
        return reductions, stores

    def inputs(self, op: Operation) -> set[Operation]:
        """The ops `op` is computed from in its own phase: up to, not through, reductions."""
        found, stack = set(), [op]
        while stack:
            for value in stack.pop().operands:
                producer = self.defs.get(value)
                fresh = producer is not None and producer not in found
                if fresh and not isinstance(producer, Reduction):
                    found.add(producer)
                    stack.append(producer)
        return found

    def closure(self, targets: list[Operation], held: Container[Value] = ()) -> list[Operation]:
        """The targets and the ops along r they need (recomputed in each r-loop), in body order;
        not those whose result is `held` already (in registers), nor what only they need."""
        needed, stack = set(targets), list(targets)
        while stack:
            for value in stack.pop().operands:
                op = self.defs.get(value)
                if (
                    op is not None
                    and op not in needed
                    and value not in held
                    and self.has_r[op]
                    and not isinstance(op, Reduction)
                ):
                    needed.add(op)
                    stack.append(op)
        return [op for op in self.ops if op in needed]


def writes_over(node: Operation, source: Value, result: Value) -> bool:
    """Whether the node may store `result` into `source`'s buffer (Inductor's in-place reuse):
    `source` is read once, directly, at the index `result` is written at, an index naming every
    loop it varies along (so each element is written once, and read only by the program that
    writes it), the stored value is computed from that read (so within a loop the read comes
    first) and in the node's last phase (so no later r-loop reads `source` again). A template's
    or a scatter's node never qualifies."""
    if node.template is not None or node.updates is not None:
        return False
    loads = [op for op in node.body.ops if isinstance(op, Load) and op.source is source]
    stores = [op for op in node.body.ops if isinstance(op, Store) and op.buffer is result]
    if len(loads) != 1 or len(stores) != 1:
        return False
    (load,), (store,) = loads, stores
    if load.indirect or store.indirect or store.mode or isinstance(load.index, list):
        return False
    nx, nr = (len(sizes) for sizes in node.sizes)
    loops = {f"p{i}" for i in range(nx + (nr if _reads_r(store, nx) else 0))}
    if not loops <= {s.name for s in sympy.sympify(store.index).free_symbols}:
        return False
    phases = Phases(node)
    last = phases.level[store] == phases.count - 1
    return last and equal(load.index, store.index) and load in phases.inputs(store)


def _reads_r(op: Operation, nx: int) -> bool:
    if not isinstance(op, INDEXED):
        return False
    expr = sympy.sympify(op.index)
    return any(
        s.name.startswith("p") and int(s.name[1:]) >= nx
        for s in expr.free_symbols
        if s.name[1:].isdigit()
    )
