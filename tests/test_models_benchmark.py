"""The model benchmark's harness on CPU (`python3 -m benchmarks.models --small --device cpu`):
rows, checks against eager, failures kept to their row, the files written. No timing is
asserted; the numbers that matter come from a GPU run. The plain-torch `mlp` model keeps these
tests independent of the `bench` extra; one test runs a transformers model where it is installed."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `benchmarks` is a plain folder at the repository root

from benchmarks import interleaved, model_row, models, zoo  # noqa: E402
from benchmarks.common import CACHE_DIRS  # noqa: E402
from benchmarks.measure import max_error  # noqa: E402
from benchmarks.model_row import MULTIPLIER, against_reference, errors, verdict  # noqa: E402
from benchmarks.workers import TimingLock  # noqa: E402

SMOKE = ["--device", "cpu", "--small", "--dtypes", "fp32"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Caches and Inductor's compile threads as a run would set them, undone afterwards."""
    for var in CACHE_DIRS:
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return tmp_path


def run_main(tmp_path: Path, *argv: str) -> tuple[list[dict], str, dict[str, Path]]:
    """Runs the benchmark with its three outputs in `tmp_path`: (JSON rows, Markdown, paths)."""
    paths = {kind: tmp_path / f"models.{kind}" for kind in ("json", "md", "png")}
    out = [arg for kind, path in paths.items() for arg in (f"--{kind}", str(path))]
    assert models.main([*argv, *out]) == 0
    return json.loads(paths["json"].read_text())["rows"], paths["md"].read_text(), paths


def by_backend(rows: list[dict], mode: str) -> dict[str, dict]:
    return {r["backend"]: r for r in rows if r["mode"] == mode}


def assert_checked(row: dict, train: bool) -> None:
    """A compiled row that ran, was timed, and passed the check against the fp64 reference."""
    assert "error" not in row, row
    assert row["ok"] is True and row["wall_ms"] > 0 and row["first_s"] > 0, row
    assert row["reference_s"] > 0 and 0 <= row["out_ratio"] <= MULTIPLIER, row
    assert row["out_rmse"] > 0 and row["out_eager_rmse"] > 0 and row["out_rel"] >= 0, row
    if train:
        assert 0 <= row["grad_ratio"] <= MULTIPLIER and row["grad_ratio_of"], row
        assert row["grad_rel"] >= 0 and row["worst_grad"], row
    else:
        assert "grad_rel" not in row and "grad_ratio" not in row


def test_mlp_training_rows_in_worker_processes(env, capsys):
    rows, md, paths = run_main(
        env, *SMOKE, "--models", "mlp", "--modes", "train", "--backends", "eager,mind",
        "--jobs", "2",
    )  # fmt: skip
    row = by_backend(rows, "train")
    assert sorted(row) == ["eager", "mind"] and len(rows) == 2
    assert row["eager"]["wall_ms"] > 0 and row["eager"]["speedup"] == 1.0
    assert_checked(row["mind"], train=True)
    assert row["mind"]["fallback"] == [] and row["mind"]["graphs"] >= 1
    assert row["mind"]["speedup"] == row["eager"]["wall_ms"] / row["mind"]["wall_ms"]
    assert md == capsys.readouterr().out.removesuffix("\n")
    assert "| model | dtype | mode | eager wall ms | mind |" in md
    assert "| mlp | fp32 | train | mind |" in md and "| ok |" in md
    if paths["png"].exists():  # matplotlib is in the bench extra
        assert paths["png"].read_bytes().startswith(b"\x89PNG")


def test_mlp_inference_rows_in_this_process(env):
    """`--jobs 0` runs rows here; a mode mind does not accept yet is an error row, not a crash."""
    rows, md, _ = run_main(
        env, *SMOKE, "--models", "mlp", "--modes", "infer", "--backends", "eager,mind,mind-ro",
        "--jobs", "0",
    )  # fmt: skip
    row = by_backend(rows, "infer")
    assert_checked(row["mind"], train=False)
    assert row["mind"]["fallback"] == []
    if "error" in row["mind-ro"]:
        assert row["mind-ro"]["traceback"] and "| mlp | fp32 | infer | mind-ro |" in md
        assert f"- mlp fp32 infer mind-ro: {row['mind-ro']['error']}" in md
    else:
        assert_checked(row["mind-ro"], train=False)


def test_hung_rows_are_stopped_and_the_run_goes_on(env):
    """A row over --timeout is ended (with its process group) and recorded; the next row gets a
    fresh worker. Starting torch alone takes longer than this timeout."""
    rows, md, _ = run_main(
        env, *SMOKE, "--models", "mlp", "--modes", "infer,train", "--backends", "mind",
        "--timeout", "0.2",
    )  # fmt: skip
    assert len(rows) == 2
    for row in rows:
        assert row["error"] == "timed out after 0.2 s (--timeout)" and "wall_ms" not in row
    assert md.count("timed out after 0.2 s") == 2


def test_deadline_marks_rows_not_run(env):
    rows, md, _ = run_main(env, *SMOKE, "--models", "mlp", "--deadline", "0")
    assert len(rows) == 2 * 5
    assert {r["error"] for r in rows} == {"not run: the run reached --deadline"}
    assert "| mlp | fp32 | infer | - | ERR | ERR | ERR | ERR |" in md


def test_transformers_model_trains_under_mind(env):
    pytest.importorskip("transformers")
    rows, _, _ = run_main(
        env, *SMOKE, "--models", "bert", "--modes", "train", "--backends", "eager,mind",
        "--jobs", "0",
    )  # fmt: skip
    assert_checked(by_backend(rows, "train")["mind"], train=True)


def test_from_json_renders_runs_again_together(tmp_path):
    meta = {
        "device_name": "cpu", "versions": {"torch": "2"}, "jobs": 1, "sizes": {},
        "models": ["m"], "dtypes": ["bf16"], "modes": ["train"],
        "backends": ["eager", "inductor", "mind"], "notes": ["how"],
    }  # fmt: skip
    base = {"model": "m", "dtype": "bf16", "mode": "train"}
    rows = [
        {**base, "backend": "mind", "wall_ms": 1.0, "ok": False, "why": "output: ratio 40",
         "out_rel": 1.0, "out_ratio": 40.0, "fallback": ["mind: graph 'g' runs eagerly: X"],
         "first_s": 2.0, "first_compiles": {"here": 3, "workers": 14}},
        {**base, "backend": "inductor", "error": "TypeError: no"},
        {**base, "backend": "eager", "wall_ms": 2.0, "gpu_ms": 1.5, "host_ms": 0.5,
         "kernels": 7, "peak_mib": 96.4, "reserved_mib": 130.2},
    ]  # fmt: skip
    infer = {**base, "mode": "infer"}
    runs = [  # training, then inference in a second run: rendered together
        (meta, rows),
        ({**meta, "modes": ["infer"]}, [{**infer, "backend": "eager", "wall_ms": 1.0},
                                        {**infer, "backend": "mind", "wall_ms": 0.25}]),
    ]  # fmt: skip
    sources = [tmp_path / f"run{i}.json" for i in range(len(runs))]
    for path, (m, r) in zip(sources, runs):
        path.write_text(json.dumps({"meta": m, "rows": r}))
    md_path = tmp_path / "out.md"
    assert models.main(["--from-json", *map(str, sources), "--md", str(md_path)]) == 0
    md = md_path.read_text()
    pivot = (
        "| m | bf16 | train | 2.000 | ERR | 2.00 (FAIL) |\n| m | bf16 | infer | 1.000 |  | 4.00 |"
    )
    assert pivot in md  # eager first, then the rest; the groups in the order of the runs
    assert "| m | bf16 | train | eager | 2.000 | 1.500 | 0.500 | 7 | 96 | 130 | - | - |" in md
    assert (
        "| m | bf16 | train | mind | 1.000 | - | - | - | - | - | 2.0 | 3 of 17 | 1.0e+00 | - | 40"
        " | - | FAIL (fallback)" in md
    )
    assert "- m bf16 train inductor: TypeError: no" in md
    assert "- m bf16 train mind: FAIL: output: ratio 40" in md
    assert "- m bf16 train mind: fallback: mind: graph 'g' runs eagerly: X" in md


def test_from_json_a_later_run_replaces_a_row_it_measured_again(tmp_path):
    meta = {
        "device_name": "cpu", "versions": {"torch": "2"}, "jobs": 1, "sizes": {},
        "models": ["m"], "dtypes": ["fp32"], "modes": ["train"], "backends": ["eager", "mind"],
        "notes": ["how"],
    }  # fmt: skip
    base = {"model": "m", "dtype": "fp32", "mode": "train"}
    first = [
        {**base, "backend": "eager", "wall_ms": 2.0},
        {**base, "backend": "mind", "wall_ms": 4.0},
    ]
    again = [
        {**base, "backend": "mind", "wall_ms": 1.0},
        {**base, "backend": "eager", "error": "not run: the run reached --deadline"},
    ]
    sources = [tmp_path / "first.json", tmp_path / "again.json"]
    for path, rows in zip(sources, (first, again)):
        path.write_text(json.dumps({"meta": meta, "rows": rows}))
    md_path = tmp_path / "out.md"
    assert models.main(["--from-json", *map(str, sources), "--md", str(md_path)]) == 0
    md = md_path.read_text()
    assert "| m | fp32 | train | 2.000 | 2.00 |" in md  # eager's row stands: the deadline came
    assert md.count("| m | fp32 | train | mind |") == 1


def test_unknown_names_are_rejected(capsys):
    with pytest.raises(SystemExit):
        models.main(["--device", "cpu", "--models", "gpt3"])
    assert "unknown gpt3; choose from gpt2," in capsys.readouterr().err


def test_errors_are_relative_to_the_largest_eager_value():
    want = {"output": torch.tensor([2.0, -4.0]), "grad a": torch.tensor([8.0]),
            "grad b": torch.tensor([1e-9])}  # fmt: skip
    got = {"output": torch.tensor([2.0, -3.5]), "grad a": torch.tensor([8.0]),
           "grad b": torch.tensor([2.0])}  # fmt: skip
    errs = errors(got, want)
    assert (errs["out_abs"], errs["out_rel"]) == (0.5, 0.125)
    assert errs["worst_grad"] == "b" and errs["grad_rel"] == pytest.approx(2.0 / 8.0)
    assert errors(want, want)["grad_rel"] == 0.0
    got["output"] = torch.tensor([float("nan"), 0.0])
    assert errors(got, want)["out_rel"] != errors(got, want)["out_rel"]  # nan
    assert max_error(torch.ones(2), torch.zeros(2)) == (1.0, 0.0)
    with pytest.raises(AssertionError, match="grad b"):
        errors({k: v for k, v in got.items() if k != "grad b"}, want)


def scaled_backend(forward: float = 1.0, backward: float = 1.0) -> Callable:
    """A torch.compile backend that is wrong on purpose: it runs the graphs AOTAutograd traces as
    they are, and multiplies the tensors that its forward (or inference) graphs return by
    `forward`, and those its backward graphs return (the gradients) by `backward`."""

    def times(factor: float) -> Callable:
        def compile(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
            def run(*args: object) -> list:
                outs = gm(*args)
                return [o * factor if isinstance(o, torch.Tensor) else o for o in outs]

            return make_boxed_func(run)

        return compile

    return aot_autograd(fw_compiler=times(forward), bw_compiler=times(backward))


def bf16_cnn_eager_and_fp64() -> tuple[dict, dict]:
    """One training step of the small `cnn` in bf16 eagerly, and of its fp64 reference."""
    task = model_row.Task("cnn", "bf16", "train", "eager", "cpu", small=True)
    module, inputs = zoo.make(zoo.MODELS["cnn"], True, "cpu", torch.bfloat16)
    truth = model_row.reference(task, module, inputs)
    return model_row.snapshot(module, model_row.stepper(task, module, module, inputs)), truth


def test_bf16_batch_norm_training_is_judged_against_fp64_not_eager(env):
    """In bf16, batch norm's backward leaves eager's own gradients far from exact (ResNet's on the
    H200: compiled and eager differ by 0.2 of the largest gradient, Inductor's as well as mind's):
    a compiled step no further from fp64 than eager's passes, however far it is from eager's."""
    eager, truth = bf16_cnn_eager_and_fp64()
    assert errors(eager, truth)["grad_rel"] > 0.05  # eager against fp64: 5% of the largest
    rows, md, _ = run_main(
        env, "--device", "cpu", "--small", "--dtypes", "bf16", "--models", "cnn",
        "--modes", "train", "--backends", "eager,mind", "--jobs", "0",
    )  # fmt: skip
    mind = by_backend(rows, "train")["mind"]
    assert_checked(mind, train=True)
    assert mind["fallback"] == [] and mind["grad_rel"] > 0.05  # against eager: as far
    assert "| cnn | bf16 | train | mind |" in md and "FAIL" not in md


def test_wrong_gradients_fail_even_where_eager_is_far_from_fp64(env, monkeypatch):
    """Gradients off by 2x fail in bf16 batch norm training, where eager's own are the farthest
    from fp64; the same backend without the error passes."""
    for factor in (1, 2):
        backend = (scaled_backend(backward=factor), None)
        monkeypatch.setitem(model_row.BACKENDS, f"grads-x{factor}", backend)
    rows, md, _ = run_main(
        env, "--device", "cpu", "--small", "--dtypes", "bf16", "--models", "cnn",
        "--modes", "train", "--backends", "grads-x1,grads-x2", "--jobs", "0",
    )  # fmt: skip
    right, wrong = by_backend(rows, "train")["grads-x1"], by_backend(rows, "train")["grads-x2"]
    assert_checked(right, train=True)
    assert wrong["ok"] is False and wrong["grad_ratio"] > 3 * MULTIPLIER, wrong
    assert wrong["out_ratio"] <= MULTIPLIER  # the forward is right
    assert f"- cnn bf16 train grads-x2: FAIL: {wrong['grad_ratio_of']}: RMS error" in md
    assert "| cnn | bf16 | train | grads-x2 |" in md and "FAIL |" in md


def test_an_fp32_output_off_by_1e_4_fails(env, monkeypatch):
    """In fp32 eager is within a few units in the last place of fp64, so a relative error of
    1e-4 (under the 1e-3 that a check against eager allowed in fp32) is far over."""
    monkeypatch.setitem(model_row.BACKENDS, "out-off", (scaled_backend(forward=1 + 1e-4), None))
    rows, md, _ = run_main(
        env, *SMOKE, "--models", "mlp", "--modes", "infer", "--backends", "out-off", "--jobs", "0"
    )  # fmt: skip
    row = by_backend(rows, "infer")["out-off"]
    assert row["ok"] is False and row["out_ratio"] > 100 and row["out_rel"] < 1e-3, row
    assert "- mlp fp32 infer out-off: FAIL: output: RMS error against fp64" in md


def test_check_floor_and_nans():
    """Synthetic fp32 steps. Where eager is exact up to one rounding, compiled may be off by a
    few roundings, not by 1e-6; a gradient zero in exact arithmetic may hold noise of the size of
    its neighbours' rounding; a nan in compiled fails, a nan in eager alone does not."""
    gen = torch.Generator().manual_seed(0)
    truth = {
        "output": torch.randn(1000, generator=gen, dtype=torch.float64),
        "grad w": torch.randn(1000, generator=gen, dtype=torch.float64),
        "grad k": torch.zeros(1000, dtype=torch.float64),  # a key bias's, under softmax
    }
    noise = torch.randn(1000, generator=gen)
    eager = {"output": truth["output"].float(), "grad w": truth["grad w"].float(),
             "grad k": 1e-12 * noise}  # fmt: skip

    def judged(**changes: torch.Tensor) -> tuple[bool, str, dict]:
        errs = against_reference({**eager, **changes}, eager, truth, torch.float32)
        return (*verdict(errs), errs)

    ok, _, errs = judged()
    assert ok and errs["out_ratio"] < 1 and errs["grad_ratio"] < 1
    ok, _, errs = judged(**{"grad k": 1e-11 * noise.flip(0)})  # ten times eager's noise
    assert ok and errs["grad_ratio"] < 1
    ok, why, errs = judged(output=(truth["output"] * (1 + 1e-6)).float())
    assert not ok and errs["out_ratio"] > MULTIPLIER and why.startswith("output: RMS error")
    ok, why, _ = judged(**{"grad w": torch.full((1000,), float("nan"))})
    assert not ok and why.startswith("grad w: RMS error against fp64 nan")
    assert verdict(against_reference(eager, {**eager, "output": eager["output"] * torch.nan},
                                     truth, torch.float32))[0]  # fmt: skip


def test_timing_lock_runs_shared_together_and_exclusive_alone(tmp_path):
    lock = TimingLock(tmp_path)
    timed = threading.Event()

    def time_alone() -> None:
        with lock.exclusive():
            timed.set()

    # Two holders at once (as two processes would be: flock locks belong to open files).
    with lock.shared(), lock.shared():
        thread = threading.Thread(target=time_alone)
        thread.start()
        assert not timed.wait(0.3)  # the timing waits for both to finish
    thread.join(10)
    assert timed.is_set()


def test_a_row_holds_the_timing_lock_shared_until_its_process_is_gone(tmp_path):
    """A finished row's teardown (CUDA context, compile pools, caches) must not run beside
    another row's timing: the timing waits for the process to end."""
    code = (
        "import sys, time; from benchmarks.workers import TimingLock; "
        "TimingLock(sys.argv[1]).shared_until_exit(); print('held', flush=True); time.sleep(0.5)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    with TimingLock(tmp_path).exclusive():
        assert proc.poll() is not None  # it had exited before the timing began
    proc.wait()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rows_have_profiles_and_cuda_graph_replays(env, monkeypatch):
    """What only CUDA has: kernel counts and GPU time from the profiler (also of CUDA-graph
    replays), host time, and reduce-overhead checked on a replay, in a training step too."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    backends = "eager,inductor-ro,mind,mind-ro"
    rows, md, _ = run_main(
        env, "--device", "cuda", "--small", "--dtypes", "fp32", "--models", "mlp",
        "--modes", "infer,train", "--backends", backends, "--jobs", "2",
    )  # fmt: skip
    meta = json.loads((env / "models.json").read_text())["meta"]
    assert all(c["ok"] for c in meta["counter_checks"].values()), meta["counter_checks"]
    assert "WARNING" not in md
    for row in rows:
        if row["backend"] in ("eager", "inductor-ro"):
            assert "error" not in row, row
        if "error" not in row:
            assert row["kernels"] > 0 and 0 < row["gpu_ms"], row
            assert row["host_ms"] == pytest.approx(row["wall_ms"] - row["gpu_ms"])
            assert row["peak_mib"] > 0, row
        if row["backend"] == "inductor-ro":
            assert_checked(row, train=row["mode"] == "train")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bf16_batch_norm_training_passes_the_fp64_check(env, monkeypatch):
    """On CUDA the reference is fp64 too (cuDNN's convolutions in fp64): Inductor's and mind's
    bf16 batch-norm training steps are no further from it than eager's."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rows, _, _ = run_main(
        env, "--device", "cuda", "--small", "--dtypes", "bf16", "--models", "cnn",
        "--modes", "train", "--backends", "eager,inductor,mind", "--jobs", "2",
    )  # fmt: skip
    for backend in ("inductor", "mind"):
        assert_checked(by_backend(rows, "train")[backend], train=True)


def test_model_phases_break_a_first_call_into_mind_passes(env):
    """`benchmarks.model_phases` on the plain-torch mlp, in a fresh process per row: each row
    names its device and dtype, and its phases hold mind's passes and the compile's total."""
    from benchmarks import model_phases

    out = env / "phases.json"
    args = ["--models", "mlp", "--modes", "train", "--small", "--no-run", "--dtype", "fp32"]
    assert model_phases.main([*args, "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert "error" not in row, row.get("error")
    assert (row["spec"]["device"], row["spec"]["dtype"]) == ("cpu", "fp32")
    phases = row["cpu"]["phases"]
    assert phases["pass:lower"] > 0 and phases["pass:to-triton"] > 0
    assert row["cpu"]["compile_s"] >= sum(v for k, v in phases.items() if k.startswith("pass:"))


def test_interleaved_rounds_time_every_backend_in_turn(env, tmp_path, capsys):
    out = tmp_path / "rows.json"
    argv = "--device cpu --small --models mlp --modes infer --backends eager,mind"
    assert (
        interleaved.main([*argv.split(), "--rounds", "3", "--steps", "2", "--json", str(out)]) == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["backend"] for r in rows] == ["eager", "mind"]
    for r in rows:
        assert len(r["rounds_ms"]) == 3 and all(t > 0 for t in r["rounds_ms"])
        assert r["median_ms"] == statistics.median(r["rounds_ms"]) and r["min_ms"] > 0
    assert rows[0]["vs_first"] == 1.0
    assert rows[1]["vs_first"] == rows[1]["median_ms"] / rows[0]["median_ms"]
    md = capsys.readouterr().out
    assert "| model | dtype | mode | backend | ms per step | min | vs eager |" in md
    assert "| mlp | bf16 | infer | mind |" in md


def test_first_calls_table_takes_medians_over_rounds_and_pairs_the_backends():
    from benchmarks import first_calls

    args = first_calls.parse_args(["--models", "resnet", "--modes", "infer", "--rounds", "3"])
    times = {("mind", "cold"): [2.0, 4.0, 3.0], ("inductor", "cold"): [8.0, 6.0, 7.0]}
    times |= {("mind", "warm"): [1.0, 1.0, 1.5], ("inductor", "warm"): [2.0, 2.0, 2.0]}
    rows = [
        {"model": "resnet", "mode": "infer", "backend": b, "run": run, "round": i, "first_s": t}
        for (b, run), ts in times.items()
        for i, t in enumerate(ts)
    ]
    rows.append({"model": "resnet", "mode": "infer", "backend": "mind", "run": "warm"})
    rows[-1] |= {"round": 3, "error": "RuntimeError: boom"}
    md = first_calls.markdown(rows, args)
    assert "| resnet | infer | 3.00 | 7.00 | 0.43 | 1.00 | 2.00 | 0.50 |" in md
    assert "error in resnet infer mind warm, round 3:" in md and "RuntimeError: boom" in md


def test_a_first_call_with_start_up_compiles_no_throwaway_first(env, monkeypatch):
    from benchmarks import first_calls, model_row

    warmed = []
    monkeypatch.setattr(model_row, "warm_up", warmed.append)
    spec = {"model": "mlp", "dtype": "fp32", "mode": "infer", "backend": "mind"}
    spec |= {"device": "cpu", "small": True}
    assert first_calls.first_call({**spec, "start_up": True})["first_s"] > 0
    assert warmed == []
    first_calls.first_call(spec)
    assert len(warmed) == 1
    md = first_calls.markdown([], first_calls.parse_args(["--models", "mlp", "--start-up"]))
    assert md.startswith("# First calls, bf16, start-up included:")


def test_first_calls_run_each_row_in_fresh_processes(env, tmp_path, capsys):
    from benchmarks import first_calls

    out = tmp_path / "first.json"
    argv = "--device cpu --small --dtype fp32 --models mlp --modes infer --backends mind"
    assert first_calls.main([*argv.split(), "--rounds", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["run"] for r in rows] == ["cold", "warm"]
    assert all("error" not in r and r["first_s"] > 0 for r in rows), rows
    assert "| mlp | infer |" in capsys.readouterr().out
