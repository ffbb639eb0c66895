"""torch.compile(backend="mind"): results match eager, every stage dumps as IR that round-trips,
and a graph that fails anywhere runs eagerly with exactly one MindFallbackWarning."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from test_runtime import BROKEN_SOURCE, SEED_SOURCE, seed
from torch._dynamo.backends.registry import lookup_backend

import mind
from mind import MindFallbackWarning, backend

STAGES = ("fx", "aten", "loops", "scheduled", "triton", "py")


pytestmark = pytest.mark.usefixtures("isolated_runtime")


def run(fn, *inputs, **options):
    """`fn` compiled by mind on `inputs`, and the fallback warnings compiling it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(fn, backend="mind", **options)(*inputs)
    return out, [str(w.message) for w in caught if issubclass(w.category, MindFallbackWarning)]


def seed_inputs():
    return tuple(torch.randn(4, 128) for _ in range(3))


def reproducer(message: str) -> Path:
    return Path(re.search(r"reproducer IR: (\S+)\)$", message).group(1))


def test_backend_resolves_by_name():
    assert "mind" in torch._dynamo.list_backends()
    assert lookup_backend("mind") is backend.mind_backend


def test_failing_pass_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(backend, "PIPELINE", "lower,no-such-pass")
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    torch.testing.assert_close(out, seed(*inputs))
    assert len(warned) == 1
    assert warned[0].startswith("mind: graph 'graph") and "unknown pass 'no-such-pass'" in warned[0]
    path = reproducer(warned[0])
    assert path.suffix == ".aten" and str(mind.parse(path.read_text())) == path.read_text()


def test_kernel_failing_at_first_call_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(backend, "generate", lambda graph, dump: BROKEN_SOURCE)
    inputs = seed_inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(seed, backend="mind")
        outs = [compiled(*inputs), compiled(*inputs)]
    warned = [str(w.message) for w in caught if issubclass(w.category, MindFallbackWarning)]
    for out in outs:
        torch.testing.assert_close(out, seed(*inputs))
    assert len(warned) == 1
    assert "KernelError: Triton failed on kernel 'triton_per_fused_add_mul_relu_sum_0'" in warned[0]
    assert "tl.no_such_op(c)" in warned[0]


def test_generated_program_runs(monkeypatch):
    monkeypatch.setattr(backend, "generate", lambda graph, dump: SEED_SOURCE)
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


def test_seed_matches_eager():
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


def test_dump_dir_writes_every_stage_as_round_tripping_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    run(seed, *seed_inputs())
    files = sorted((tmp_path / "dump").iterdir())
    assert {f.suffix[1:] for f in files} >= set(STAGES)
    for f in files:
        if f.suffix != ".py":
            text = f.read_text()
            assert str(mind.parse(text, f.name)) == text, f.name


def test_symbolic_sizes_match_eager_without_fallback():
    compiled = torch.compile(seed, backend="mind", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows, cols in ((4, 128), (6, 32)):
            inputs = tuple(torch.randn(rows, cols) for _ in range(3))
            torch.testing.assert_close(compiled(*inputs), seed(*inputs))
    assert not [w for w in caught if issubclass(w.category, MindFallbackWarning)]
