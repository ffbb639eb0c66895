"""realize and inline: outputs re-parse identically, both passes are idempotent, and the graphs
they produce compute exactly what their inputs computed (loops evaluator)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from mind.dialects.torch_types import to_torch
from mind.interpreters.loops import evaluate
from mind.ir.core import Module
from mind.ir.diagnostics import MindError
from mind.ir.printer import print_module
from mind.ir.types import TensorType
from mind.passes import run_pipeline
from mind.tools.split import split_input
from torch.testing import assert_close

import mind

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import PROGRAMS, no_fallback  # noqa: E402

#: lit inputs and the realize options their RUN lines use
LIT_FILES = {
    "realize/rules.loops": "realize",
    "realize/options.loops": "realize{max-body-ops=4,reads-threshold=1}",
    "realize/fixed_layouts.loops": "realize",
    "realize/costly.loops": "realize",
    "inline/inline.loops": "realize",
    "inline/seed.loops": "realize",
}
CASES = [
    pytest.param(chunk, realize, id=f"{name}#{i}")
    for name, realize in LIT_FILES.items()
    for i, (chunk, _) in enumerate(split_input((ROOT / "lit_tests" / name).read_text()))
]
LOWERED = ["seed", "views", "embedding", "cat_where", "softmax_layer_norm", "reductions"]


def run(text: str, pipeline: str) -> str:
    return print_module(run_pipeline(mind.parse(text), pipeline))


def random_inputs(graph, seed: int = 0) -> list[torch.Tensor]:
    """Inputs laid out as the graph's types say; integers small enough to index anything."""
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for arg in graph.body.args:
        t = arg.type
        assert isinstance(t, TensorType)
        shape, dtype = [int(s) for s in t.shape], to_torch(t.dtype)
        if dtype.is_floating_point:
            data = torch.randn(shape, generator=gen).to(dtype)
        elif dtype == torch.bool:
            data = torch.rand(shape, generator=gen) > 0.5
        else:
            data = torch.randint(0, 3, shape, generator=gen).to(dtype)
        strides = [int(s) for s in t.strides] if t.strides else data.stride()
        inputs.append(torch.empty_strided(shape, strides, dtype=dtype).copy_(data))
    return inputs


def assert_same_results(before: Module, after: Module) -> None:
    for g0, g1 in zip(before.ops, after.ops, strict=True):
        inputs = random_inputs(g0)
        for x, y in zip(evaluate(g0, inputs), evaluate(g1, inputs), strict=True):
            assert_close(y, x, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("text, realize", CASES)
def test_round_trip_idempotent_and_numerics(text: str, realize: str):
    realized = run(text, realize)
    inlined = run(realized, "inline")
    for out, pipeline in ((realized, realize), (inlined, "inline")):
        assert print_module(mind.parse(out)) == out
        assert run(out, pipeline) == out
    assert run(inlined, realize) == inlined
    assert_same_results(mind.parse(text), mind.parse(inlined))


@pytest.mark.parametrize("name", LOWERED)
def test_lowered_programs(name: str):
    fn, make = PROGRAMS[name]
    lowered = print_module(run_pipeline(mind.capture(fn, *make(), stage="aten"), "lower"))
    out = run(lowered, "realize,inline")
    assert print_module(mind.parse(out)) == out
    assert run(out, "realize,inline") == out
    final = mind.parse(out)
    for op in final.walk():
        if op.name == "loops.load":
            assert not isinstance(op.args[1], list), f"N-d load left after inline: {op}"
    assert_same_results(mind.parse(lowered), final)


SEED_INLINED_BODY = """\
    %0 = loops.load(%arg0_1, 128*p0 + p1) : f32
    %1 = loops.load(%arg1_1, 128*p0 + p1) : f32
    %2 = loops.add(%0, %1) : f32
    %3 = loops.load(%arg2_1, 128*p0 + p1) : f32
    %4 = loops.relu(%3) : f32
    %5 = loops.mul(%2, %4) : f32
    loops.yield(%5)"""


def test_seed_from_capture():
    fn, make = PROGRAMS["seed"]
    out = run_pipeline(mind.capture(fn, *make(), stage="aten"), "lower,realize,inline")
    (node, output) = out.ops[0].body.ops
    assert node.result.name == "buf0" and node.name == "loops.reduction"
    assert node.attrs["origins"] == ["add", "mul", "relu", "sum"]
    assert SEED_INLINED_BODY in print_module(out)
    assert output.values == (node.result,)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(q, k, positions, inv_freq):
    """A rotary embedding as transformers writes it: cos and sin tables of (positions, head
    dim), broadcast over batch and heads."""
    freqs = positions[:, None].float() * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def test_rotary_tables_are_computed_once(tmp_path, monkeypatch):
    """The cos and sin tables are computed once, not in every element of the query and the key
    (realize's costly-and-broadcast rule), and the results agree with eager's."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 16, 8, generator=gen)
    k = torch.randn(2, 2, 16, 8, generator=gen)
    positions, inv_freq = torch.arange(16), 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8)
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        got = torch.compile(rotary, backend="mind")(q, k, positions, inv_freq)
    for g, want in zip(got, rotary(q, k, positions, inv_freq), strict=True):
        torch.testing.assert_close(g, want)
    (source,) = [p.read_text() for p in tmp_path.glob("*.py")]
    assert source.count("tl.cos(") == 1 and source.count("tl.sin(") == 1


def test_realize_option_errors():
    with pytest.raises(MindError, match="option 'reads-threshold' of pass 'realize' expects int"):
        run_pipeline(mind.parse(CASES[0].values[0]), "realize{reads-threshold=x}")
