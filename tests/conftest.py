"""Fixtures shared by the tests that compile through the backend."""

from __future__ import annotations

import itertools

import pytest
import torch
from mind.runtime import loader
from torch._dynamo.utils import counters

from mind import backend


@pytest.fixture
def isolated_runtime(tmp_path, monkeypatch):
    """Private caches (mind's, and Inductor's, which holds AOTAutograd's), no dump directory, a
    fresh Dynamo and its counters, graphs named from graph0 again: nothing leaks between tests."""
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(backend, "_GRAPH_NAMES", (f"graph{i}" for i in itertools.count()))
    monkeypatch.delenv("MIND_DUMP_DIR", raising=False)
    monkeypatch.setattr(loader, "_MODULES", {})
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


@pytest.fixture
def without_aot_cache():
    """AOTAutograd's cache off: a graph compiled again goes through mind's own graph cache.
    Through torch's own config patch: pytest 9.2's monkeypatch deletes what it set on undo when
    the module's __dict__ lacked it, and deleting a torch config entry removes the option."""
    import torch._functorch.config

    with torch._functorch.config.patch(enable_autograd_cache=False):
        yield


@pytest.fixture
def compiled_for_the_gpu(monkeypatch):
    """Kernels must be compiled for CUDA, not run by Triton's interpreter."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
