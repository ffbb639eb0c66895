"""Smoke test of the benchmark harness on CPU: every case runs, failures stay in their cell.
No timing is asserted; the numbers that matter come from a GPU run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `benchmarks` is a plain folder at the repository root

from benchmarks import run  # noqa: E402
from benchmarks.cases import CASE_NAMES, CASES, make_inputs, select  # noqa: E402
from benchmarks.common import CACHE_DIRS  # noqa: E402
from benchmarks.measure import compare  # noqa: E402
from benchmarks.report import markdown  # noqa: E402


def test_small_cpu_run_covers_every_case(tmp_path, capsys, monkeypatch):
    for var in CACHE_DIRS:  # main would set them for good
        monkeypatch.setenv(var, str(tmp_path / var))
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = ["--device", "cpu", "--small", "--backends", "eager,mind", "--json", str(out)]
    assert run.main([*argv, "--png", str(png)]) == 0
    if png.exists():  # matplotlib is in the bench extra
        assert png.read_bytes().startswith(b"\x89PNG")
    stdout = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [r["name"] for r in data["cases"]] == list(CASE_NAMES)
    for row in data["cases"]:
        eager, mind = row["cells"]["eager"], row["cells"]["mind"]
        assert "error" not in eager and eager["ms"] > 0, row
        assert row["bytes"] > 0
        # mind is unfinished: either a checked, timed result or a recorded error
        assert ("error" in mind) or (mind["ok"] in (True, False) and mind["ms"] > 0), row
        assert f"| {row['name']} |" in stdout
    assert "| case | dtype | bytes moved | eager ms | mind ms |" in stdout


def test_fresh_caches_are_cold_and_removed_when_the_process_exits(tmp_path):
    """A benchmark's fresh caches (Inductor's, Triton's, mind's compiled kernels) go with the
    process that made them, rather than piling up in the temporary folder run after run. A cache
    the caller chose stays where it is; the default folder that importing `torch._dynamo` puts
    in the environment does not count as chosen (every run shares it: Inductor's first calls
    were warm from the second run on), nor does an inherited value where a row names its own."""
    script = (
        "import os, sys\n"
        "from benchmarks.common import fresh_caches\n"
        "import torch._dynamo\n"
        "assert os.environ['TORCHINDUCTOR_CACHE_DIR']  # torch's default, set by the import\n"
        "inductor = fresh_caches()\n"
        "made, mine = os.path.dirname(inductor), os.environ['TRITON_CACHE_DIR']\n"
        "os.makedirs(os.environ['MIND_CACHE_DIR'])\n"
        "open(os.path.join(os.environ['MIND_CACHE_DIR'], 'kernel.py'), 'w').close()\n"
        "row = fresh_caches(sys.argv[1])\n"
        "print(made, inductor, mine, os.environ['TRITON_CACHE_DIR'], row)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in CACHE_DIRS}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "mine")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "row")],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    made, inductor, mine, triton, row = out.stdout.split()
    assert inductor == os.path.join(made, "inductor") and mine == str(tmp_path / "mine")
    assert made.startswith(tempfile.gettempdir()) and not Path(made).exists()
    assert triton == str(tmp_path / "row" / "triton")  # the row's, over the caller's
    assert row == str(tmp_path / "row" / "inductor")


def test_script_form_rejects_bad_case_name():
    proc = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--device", "cpu", "--cases", "nope"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and "unknown nope" in proc.stderr


def test_every_case_runs_eagerly_at_small_size():
    for case in CASES:
        out = case.fn(*make_inputs(case, "cpu", small=True))
        assert torch.isfinite(out.float()).all(), case.name


def test_select_rejects_unknown_names():
    assert [c.name for c in select(["softmax_1024x65536"])] == ["softmax_1024x65536"]
    with pytest.raises(ValueError, match="unknown case"):
        select(["softmax"])


def test_compare_reports_mismatch_shape_and_dtype():
    x = torch.ones(4)
    assert compare(x + 1e-5, x, 1e-3)[0]
    ok, err, why = compare(x + 1, x, 1e-3)
    assert not ok and err == 1.0 and "over tolerance" in why
    assert not compare(torch.ones(3), x, 1e-3)[0]
    assert not compare(x.bfloat16(), x, 1e-3)[0]


def test_markdown_marks_errors_failures_and_fallbacks():
    cells = {
        "eager": {"ms": 1.0, "gbps": 2.0, "copy_frac": 0.5, "kernels": 3},
        "inductor": {"ms": 0.5, "gbps": 4.0, "copy_frac": 1.0, "compile_s": 2.0, "ok": False,
                     "why": "max abs error 1 over tolerance 0.001"},
        "mind": {"error": "MindError: boom"},
    }  # fmt: skip
    row = {"name": "c", "dtype": "float32", "bytes": 2_000_000, "cells": cells}
    meta = {"device_name": "cpu", "copy_gbps": 4.0, "timing": "t"}
    text = markdown([row], ["eager", "inductor", "mind"], meta)
    assert "| c | float32 | 2 MB | 1.000 | 0.500 | ERR | - | 2 (50%) | 4 (100%) |" in text
    assert "| FAIL | ERR |" in text
    assert "- c / mind: MindError: boom" in text
    assert "- c / inductor: max abs error 1 over tolerance 0.001" in text
    cells["mind"] = {"ms": 1.0, "ok": True, "fallback": ["mind: graph 'g' runs eagerly"]}
    text = markdown([row], ["eager", "mind"], meta)
    assert "ok (eager fallback)" in text and "- c / mind: mind: graph 'g' runs eagerly" in text


def test_launch_chart_draws_each_backends_speedup(tmp_path):
    from benchmarks import launch
    from benchmarks.plot import save

    rows = [{"what": "launch", "us": 3.0}] + [
        {"graph_kernels": n, "backend": b, "us_per_call": us}
        for n in (1, 8)
        for b, us in (("eager", 40.0 * n), ("mind", 10.0 * n), ("inductor", 20.0 * n))
    ]
    chart = launch.chart(rows, "test")
    assert chart.groups == ["1 softmax", "8 softmax"]
    assert [b.value for b in chart.series["mind"]] == [4.0, 4.0]
    assert [b.value for b in chart.series["mind reduce-overhead"]] == [None, None]  # ERR
    pytest.importorskip("matplotlib")
    save(str(tmp_path / "launch.png"), chart)
    assert (tmp_path / "launch.png").read_bytes().startswith(b"\x89PNG")


def test_sweep_variants_are_pipelines_and_its_table_reads():
    from benchmarks import sweep
    from mind.options import check_pipeline

    for name, pipeline in sweep.VARIANTS.items():
        check_pipeline(pipeline, name)
    text = sweep.table({"softmax": 2.0}, {"default": {"softmax": 3.0}, "x": {"softmax": None}})
    assert "| softmax | 2.000 | 3.000 (1.50) | ERR |" in text


def test_tuning_report_reads_the_records(tmp_path):
    from benchmarks import tuning

    folder = tmp_path / "tuning"
    folder.mkdir()
    kernel = {"winner": "b", "candidates": ["a", "b"], "ms": [2.0, 1.0], "sizes": [64, 32]}
    matmul = {"winner": "aten", "ms": {"template": 2.0, "aten": 1.0}, "problem": "mm"}
    for i, record in enumerate([kernel, matmul]):
        (folder / f"{i}.json").write_text(json.dumps(record))
    (folder / "bad.json").write_text("{not json")
    rows = tuning.records(folder)
    assert "| [64, 32] | a | 2.0000 | b | 1.0000 | 2.00x |" in tuning.kernel_table(rows)
    assert "| mm | 2.0000 | 1.0000 | aten |" in tuning.matmul_table(rows)


def test_kernel_table_sorts_kernels_by_kind_and_time_per_step():
    from benchmarks import kernels

    names = {
        "triton_per_fused_native_layer_norm_0": "triton",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1": "matmul",
        "nvjet_tst_128x64_64x8_1x2_h_bz_NNT": "matmul",
        "cudnn::engines_precompiled::implicit_convolve_sgemm": "convolution",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>": "attention",
        "Memcpy DtoD (Device -> Device)": "copy, fill",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>": (
            "other aten"
        ),
    }
    assert {n: kernels.kind_of(n) for n in names} == names
    events = [("triton_a", 3.0), ("triton_a", 5.0), ("nvjet_x", 10.0), ("triton_b", 1.0)] * 2
    table = kernels.per_step(events, steps=2)
    assert table["triton_a"] == {"calls": 2.0, "us": 8.0}
    assert kernels.by_kind(table) == {"triton": 9.0, "matmul": 10.0}
    row = {"model": "m", "dtype": "bf16", "mode": "infer", "kernels": {"mind": table, "x": {}}}
    text = kernels.markdown(row, top=1)
    assert "| triton | 9.0 | 0.0 |" in text and "| **all** | **19.0** | **0.0** |" in text
    assert "| `nvjet_x` | matmul | 1 | 10.0 |" in text and "triton_a`" not in text


def test_kernel_rows_profile_each_backends_warm_steps():
    """The plumbing on CPU, where the profiler sees no device kernels: each backend's row."""
    import argparse

    from benchmarks import kernels

    args = argparse.Namespace(backends=["eager", "mind"], device="cpu", small=True, steps=1)
    row = kernels.row_of("mlp", "fp32", "infer", args)
    assert row["kernels"] == {"eager": {}, "mind": {}}


def test_optimizer_step_rows_say_how_far_each_step_is_from_eager(tmp_path, monkeypatch):
    """`--params small` on CPU: eager foreach and mind's compiled step (its foreach ops fused
    per tensor), the same parameters after one step, and a table and JSON of the rows."""
    from benchmarks import optimizer

    for var in CACHE_DIRS:
        monkeypatch.setenv(var, str(tmp_path / var))
    out = tmp_path / "opt.json"
    argv = ["--params", "small", "--device", "cpu", "--backends", "eager-foreach,mind"]
    assert optimizer.main([*argv, "--json", str(out), "--md", str(tmp_path / "opt.md")]) == 0
    rows = {r["backend"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["eager-foreach"]["max_diff"] == 0
    assert "error" not in rows["mind"] and rows["mind"]["fallbacks"] == []
    assert rows["mind"]["max_diff"] < 1e-7 and rows["mind"]["ms"] > 0
    assert "| mind |" in (tmp_path / "opt.md").read_text()


def test_a_step_s_phases_leave_out_what_ran_before_it(monkeypatch):
    """A collection while the model is built (a library imported, say) belongs to no step:
    `compile_phases` once charged it to the first call's `gc`."""
    from benchmarks import compile_phases

    now = [0.0]
    monkeypatch.setattr(compile_phases, "CLOCKS", {"cpu": lambda: now[0], "wall": lambda: now[0]})
    phases = compile_phases.Phases()
    phases._collected("start", {})
    now[0] += 5.0  # a collection of 5 "seconds", before the step
    phases._collected("stop", {})
    spec = {"backend": "eager", "mode": "infer", "device": "cpu"}
    steps = compile_phases.first_call(spec, torch.nn.Linear(4, 4), torch.ones(2, 4), phases)
    assert steps["forward"]["phases"]["wall"].get("gc", 0.0) == 0.0


def test_compile_time_times_the_models_benchmark_s_models(capsys):
    """`--models`: a row per model, whose first call `compile_phases` times (a training step:
    forward and backward) after running it once eagerly."""
    import gc

    from benchmarks import compile_phases, compile_time

    args = compile_time.parse_args(["--models", "mlp,cnn", "--small", "--modes", "train"])
    specs = compile_time.specs(args, "eager", "train")
    assert [(s["model"], s["small"], s["dtype"]) for s in specs] == [
        ("mlp", True, "fp32"),
        ("cnn", True, "fp32"),
    ]
    callbacks = list(gc.callbacks)
    try:
        compile_phases.main([json.dumps(specs[0])])
    finally:
        gc.callbacks[:] = callbacks
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(row["steps"]) == {"forward", "backward"} and row["spec"]["model"] == "mlp"
