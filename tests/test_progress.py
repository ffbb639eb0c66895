"""The progress bar: on a terminal while a graph compiles, nothing elsewhere."""

from __future__ import annotations

import io
import sys

import pytest
import torch
from test_runtime import seed

from mind import progress as progress_module
from mind.progress import progress

pytestmark = pytest.mark.usefixtures("isolated_runtime")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_each_step(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(progress_module, "DELAY", 0)
    monkeypatch.setattr(progress_module, "REFRESH", 0)
    screen = Terminal()
    with progress("graph0_forward", 2, screen) as done:
        done("lower")
        done("fuse")
    shown = screen.getvalue()
    assert "mind: graph0_forward" in shown and "2/2" in shown and "fuse" in shown


def test_no_terminal_no_bar():
    screen = io.StringIO()
    with progress("graph0_forward", 2, screen) as done:
        done("lower")
    assert screen.getvalue() == ""


def test_a_compiling_graph_shows_its_passes_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(progress_module, "DELAY", 0)
    monkeypatch.setattr(progress_module, "REFRESH", 0)
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    inputs = tuple(torch.randn(4, 128) for _ in range(3))
    torch.testing.assert_close(torch.compile(seed, backend="mind")(*inputs), seed(*inputs))
    shown = screen.getvalue()
    assert "mind: graph0_forward" in shown and "to-triton" in shown and "kernels compiled" in shown
