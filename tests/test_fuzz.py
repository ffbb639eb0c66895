"""Bad IR text gets a located diagnostic, never a traceback: a fixed-seed slice of the mutation
fuzzer (`python3 -m mind.tools.fuzz`), the crash classes it found, and the tools' last line of
defence (an internal error is one diagnostic naming the pass, exit code 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mind.passes import PASSES
from mind.target import triton as triton_target
from mind.tools import fuzz, mind_opt, mind_translate

LIT = Path(__file__).resolve().parent.parent / "lit_tests"


def test_fuzz_slice_raises_no_traceback():
    report = fuzz.campaign(fuzz.lit_corpus(LIT), count=300, seed=0, minimize=False)
    assert sum(report.counts.values()) == 300
    assert report.counts["diagnostic"] > 200  # the mutants do reach the error paths
    assert not report.crashes and not report.counts["bad-python"], fuzz.render(report)


def test_mutation_is_deterministic_per_seed():
    import random

    text = (LIT / "triton" / "seed.scheduled").read_text()
    first = [fuzz.mutate(text, random.Random(7)) for _ in range(3)]
    assert first == [fuzz.mutate(text, random.Random(7)) for _ in range(3)]
    assert any(m != text for m in first)


LOOPS = "loops.graph @g(%x: {type}) {attrs}{{\n  loops.output()\n}}\n"
FX = """fx.graph @g {{
  %x = fx.placeholder @{name} : f32[2, 3][3, 1]cpu
  %r = fx.call_function @{target}(%x, %x) : f32[2, 3][3, 1]cpu
  fx.output((%r,))
}}
"""
ATEN = """aten.graph @g(%x: f32[4, 8][8, 1]cpu) {
  %s = aten.sum.dim_IntList(%x, [-128]) : f32[4][1]cpu
  aten.output(%s)
}
"""
FX_TWICE = """fx.graph @g {
  %x = fx.placeholder @x : f32[2][1]cpu
  %y = fx.placeholder @x : f32[2][1]cpu
  %r = fx.call_function @operator.add(%x, %y) : f32[2][1]cpu
  fx.output((%r,))
}
"""
BAD_INPUTS = {
    "json_escape": (LOOPS.format(type="f32[4]", attrs='{a = "\\q"} '), 1, "unexpected character"),
    "lone_surrogate": (LOOPS.format(type="f32[4]", attrs='{a = "\\ud800"} '), 1, "surrogate"),
    "mod_by_zero": (LOOPS.format(type="f32[Mod(4, 0)]", attrs=""), 1, "division by zero"),
    "not_finite": (LOOPS.format(type="f32[floor(1/0)]", attrs=""), 1, "not finite"),
    "stride_2_63": (LOOPS.format(type="f32[4][9223372036854775808]", attrs=""), 1, "64 bits"),
    "device_00": (LOOPS.format(type="f32[4]cuda:00", attrs=""), 1, "unexpected"),
    "device_index": (LOOPS.format(type="f32[4]cuda:128", attrs=""), 1, "beyond 127"),
    "keyword_symbol": (LOOPS.format(type="f32[yield]", attrs=""), 1, "reserved word"),
    "device_symbol": (LOOPS.format(type="f32[4, cuda]", attrs=""), 1, "reserved word"),
    "literal_symbol": (LOOPS.format(type="f32[nan]", attrs=""), 1, "reserved word"),
    "dtype_symbol": (LOOPS.format(type="f32[i64]", attrs=""), 1, "reserved word"),
    "floor_arity": (LOOPS.format(type="f32[floor(s0, 2)]", attrs=""), 1, "does not take 2"),
    "dim_out_of_range": (ATEN, 2, "rejects its arguments"),
    "int_beyond_64_bits": (ATEN.replace("[-128]", "[-18446744073709551616]"), 2, "64 bits"),
    "placeholder_dotted": (FX.format(name="a.b", target="operator.add"), 2, "identifier"),
    "placeholder_twice": (FX_TWICE, 3, "second placeholder"),
    "target_missing": (FX.format(name="x", target="torch.xyz123"), 3, "'xyz123' is missing"),
    "target_not_callable": (FX.format(name="x", target="torch.float32"), 3, "not callable"),
    "torch_rejects": (FX.format(name="x", target="torch.mm"), 3, "torch rejects this graph"),
    "call_arity": (FX.format(name="x", target="operator.neg"), 3, "cannot take these arguments"),
    "not_a_graph": ("fx.output(())\n", 1, "runs on fx.graph ops"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_gets_a_located_diagnostic(name, tmp_path, capsys):
    text, line, message = BAD_INPUTS[name]
    path = tmp_path / f"bad.{text.split('.', 1)[0]}"
    path.write_text(text)
    argv = [str(path)] + (["--pass=to-aten"] if path.suffix == ".fx" else [])
    assert mind_opt.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:{line}:") and message in err, err
    assert "Traceback" not in err


def test_graph_symbol_becomes_a_python_name(tmp_path, capsys):
    """`@torch.float32` named the wrapper `def call_torch.float32(args)`, and exited 0."""
    seed = (LIT / "triton" / "seed.scheduled").read_text().replace("@graph0_forward", '@"a.b c"')
    text = seed + seed.replace('@"a.b c"', "@torch.float32")
    path = tmp_path / "two.scheduled"
    path.write_text(text)
    assert mind_translate.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "def call_a_b_c(args):" in out and "def call_torch_float32(args):" in out


def test_an_exception_in_a_pass_is_an_internal_error_naming_the_pass(monkeypatch, capsys):
    def broken(self, module):
        raise RuntimeError("a bug")

    monkeypatch.setattr(PASSES["fuse"], "run", broken)
    path = str(LIT / "triton" / "seed.scheduled")
    assert mind_opt.main([path, "--pass=fuse"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: internal error in pass 'fuse': RuntimeError: a bug")
    assert "Traceback" not in err


def test_an_exception_in_emit_is_an_internal_error(monkeypatch, capsys):
    def broken(module):
        raise KeyError("r0_index")

    monkeypatch.setattr(triton_target, "emit", broken)
    path = str(LIT / "triton" / "seed.scheduled")
    assert mind_translate.main([path]) == 1
    err = capsys.readouterr().err
    assert f"{path}: internal error in emitting Python: KeyError: 'r0_index'" in err


def test_a_size_symbol_named_like_a_block_size_is_an_error(tmp_path, capsys):
    """A size `XBLOCK` became a second kernel parameter of that name (a SyntaxError)."""
    text = """loops.graph @g(%x: f32[4, XBLOCK][XBLOCK, 1]cpu) {
  %add = loops.pointwise {origins = ["add"]} : f32[4, XBLOCK][XBLOCK, 1]cpu {
    %0 = loops.load(%x, XBLOCK*p0 + p1) : f32
    loops.yield(%0)
  }
  loops.output(%add)
}
"""
    path = tmp_path / "clash.loops"
    path.write_text(text)
    assert mind_translate.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "kernel argument 'XBLOCK' is also a block size" in err and "Traceback" not in err
