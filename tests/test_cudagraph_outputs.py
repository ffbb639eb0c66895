"""The output rule of CUDA graphs (runtime/cudagraphs.py), on CPU: torch's capture is replaced by
one that keeps the calls made under it and reruns them into the captured outputs on replay, as
a CUDA graph rewrites its memory. What a replay hands out, and when a recording is busy: an
output a caller holds is never overwritten."""

from __future__ import annotations

import contextlib

import pytest
import torch
from mind.runtime import cudagraphs
from torch._dynamo.utils import counters


class FakeGraph:
    """A capture that keeps (function, inputs, outputs) of each call made under it."""

    capturing: FakeGraph | None = None

    def __init__(self):
        self.calls = []

    def replay(self) -> None:
        for fn, inputs, outputs in self.calls:
            for out, value in zip(outputs, fn(inputs), strict=True):
                out.copy_(value)


@contextlib.contextmanager
def capture(graph: FakeGraph, pool=None):
    FakeGraph.capturing = graph
    try:
        yield
    finally:
        FakeGraph.capturing = None


@pytest.fixture
def graphs(monkeypatch):
    """A CudaGraphs runner of `x * 2 + 1` (its call clears its arguments, as generated code
    does) over CPU tensors, recorded by FakeGraph."""
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", capture)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    monkeypatch.setattr(cudagraphs, "_unrecordable", lambda args: None)
    counters.clear()

    def fn(inputs: list) -> list:
        return [inputs[0] * 2 + 1]

    def call(args: list) -> tuple:
        inputs = list(args)
        args.clear()
        outputs = fn(inputs)
        if FakeGraph.capturing is not None:
            FakeGraph.capturing.calls.append((fn, inputs, outputs))
        return tuple(outputs)

    return cudagraphs.CudaGraphs(call, "g", set(), lambda args: None, 8, 2)


def outcomes() -> dict[str, int]:
    return dict(counters["mind_cudagraphs"])


def test_outputs_held_at_once_are_never_overwritten(graphs):
    x = torch.randn(8)
    outs = [graphs([x * i])[0] for i in range(5)]
    for i, out in enumerate(outs):
        torch.testing.assert_close(out, x * i * 2 + 1)
    # 1 warms up, 2 records, 3 records again (2's output is held), 4 and 5 run unrecorded
    assert outcomes() == {"warm-up": 1, "record": 2, "unrecorded: outputs held": 2}


def test_a_released_output_is_handed_out_again(graphs):
    """No tensor is made per output and call: each replay hands out the capture's own."""
    x = torch.randn(8)
    graphs([x])
    first = graphs([x])[0]
    kept = id(first)
    del first
    for i in range(3):
        out = graphs([x + i])[0]
        assert id(out) == kept
        torch.testing.assert_close(out, (x + i) * 2 + 1)
        del out
    assert outcomes() == {"warm-up": 1, "record": 1, "replay": 3}


@pytest.mark.parametrize(
    "hold",
    [
        lambda out: out,
        lambda out: out[2:],  # a view
        lambda out: out.detach(),  # an alias, as autograd stores a gradient it took over
    ],
    ids=["tensor", "view", "alias"],
)
def test_whatever_holds_an_output_keeps_its_recording_busy(graphs, hold):
    x = torch.randn(8)
    graphs([x])
    held = hold(graphs([x])[0])
    before = held.clone()
    torch.testing.assert_close(graphs([x + 1])[0], (x + 1) * 2 + 1)
    torch.testing.assert_close(held, before)
    assert outcomes() == {"warm-up": 1, "record": 2}
