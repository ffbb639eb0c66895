"""Autotuning's mechanism on CPU tensors (codegen/autotune.py, runtime/autotune.py,
mind/tuning.py): candidates listed in the triton IR, a fake timer picking the winner, the tuning
cache written, reused and repaired, the heuristic kept when nothing can be timed, and the choice
of a matmul template against ATen. What tuning finds on a GPU is for benchmarks, not tests."""

import json
import os
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from mind.parser import parse
from mind.passes import run_pipeline
from mind.runtime import autotune, load, loader
from mind.runtime.compile_pool import Pool
from mind.runtime.progress import Silent, progress
from mind.target.triton import emit

from mind.options import PIPELINE, pipeline_of, resolve_options

ROOT = os.path.join(os.path.dirname(__file__), "..")
SEED = (
    open(os.path.join(ROOT, "lit_tests", "triton", "seed.scheduled"))
    .read()
    .replace("cuda:0", "cpu")
)


@pytest.fixture
def timer(isolated_runtime, tmp_path):
    """A fake timer: run `fn` once, then report `times[k]` for its k-th call (5.0 past them)."""

    class Fake:
        calls = 0
        times: list[float] = []

        def __call__(self, fn):
            fn()
            self.calls += 1
            return self.times[self.calls - 1] if self.calls <= len(self.times) else 5.0

    fake = Fake()
    autotune.set_timer(fake)
    yield fake
    autotune.set_timer(None)


def tuned_seed():
    source = emit(run_pipeline(parse(SEED), "to-triton{autotune=true}"))
    return source, load(source, "seed", interpret=True)


def check_seed(module):
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    torch.testing.assert_close(module.call([a, b, c])[0], ((a + b) * c.relu()).sum(-1))


def records(tmp_path):
    return list((tmp_path / "cache" / "tuning").glob("*.json"))


def test_launches_list_their_candidates():
    """Other configs of the kernel and a looped kernel for the persistent one, each with its
    grid; the triton IR prints and parses back."""
    text = str(run_pipeline(parse(SEED), "to-triton{autotune=true}"))
    assert str(parse(text)) == text
    (launch,) = [line for line in text.splitlines() if "triton.launch" in line]
    assert (
        '("triton_per_fused_add_mul_relu_sum_0", {XBLOCK: 2, R0_BLOCK: 128, num_warps: 2, num_stages: 1}, (2, 1, 1))'
        in launch
    )
    assert (
        '("triton_red_fused_add_mul_relu_sum_0", {XBLOCK: 1, R0_BLOCK: 128, num_warps: 2, num_stages: 1}, (4, 1, 1))'
        in launch
    )
    assert "triton.kernel @triton_red_fused_add_mul_relu_sum_0(" in text
    assert "candidates" not in str(run_pipeline(parse(SEED), "to-triton"))


def test_the_fastest_candidate_wins_and_is_recorded(timer, tmp_path):
    timer.times = [3.0, 4.0, 1.0]
    _, module = tuned_seed()
    check_seed(module)
    assert timer.calls > 3  # every candidate ran
    (path,) = records(tmp_path)
    record = json.loads(path.read_text())
    assert record["winner"] == record["candidates"][2]
    assert record["ms"][:3] == [3.0, 4.0, 1.0]


#: column sums of 392 rows: the heuristic masks the rows, Inductor's 64 x 8 does not (8 | 392)
COLUMN_SUMS = """scheduled.graph @column_sums(%arg0_1: f32[392, 8][8, 1]cpu) {
  %buf0 = scheduled.node @op0 {sizes = ([8], [392]), device = cpu, origins = ["sum"], writes = [(%buf0, c0, {c0: 8})], met = [], unmet = []} : f32[8][1]cpu {
    %0 = scheduled.load(%arg0_1, p0 + 8*p1) : f32
    %1 = scheduled.reduction(%0) {reduction_type = "sum"} : f32
    scheduled.store(%buf0, p0, %1)
  }
  scheduled.output(%buf0)
}
"""


def test_a_candidate_with_a_kernel_of_its_own_can_win(timer, tmp_path):
    """A config that needs another source (no row mask) runs its own kernel, `_v1`."""
    module = run_pipeline(parse(COLUMN_SUMS), "to-triton{autotune=true}")
    (launch,) = [op for op in module.ops[-1].body.ops if op.name == "triton.launch"]
    names = [kernel for kernel, _, _ in launch.candidates]
    assert "triton_red_fused_sum_0_v1" in names
    timer.times = [5.0] * (1 + names.index("triton_red_fused_sum_0_v1")) + [1.0]
    tuned = load(emit(module), "column_sums", interpret=True)
    x = torch.randn(392, 8)
    torch.testing.assert_close(tuned.call([x])[0], x.sum(0))
    (path,) = records(tmp_path)
    assert json.loads(path.read_text())["winner"].startswith("triton_red_fused_sum_0_v1(")


def test_a_recorded_winner_is_used_without_timing(timer, tmp_path, monkeypatch):
    timer.times = [3.0, 1.0]
    source, _ = tuned_seed()
    winner = json.loads(records(tmp_path)[0].read_text())["winner"]
    monkeypatch.setattr(loader, "_MODULES", {})
    calls = timer.calls
    chosen = []
    original = autotune.Tuned.choose
    monkeypatch.setattr(
        autotune.Tuned, "choose", lambda self: chosen.append(original(self)) or chosen[-1]
    )
    check_seed(load(source, "seed", interpret=True))
    assert timer.calls == calls  # nothing ran again
    assert chosen == [1] and "XBLOCK=1" in winner


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: "{not json",
        lambda r: json.dumps({**r, "key": "0" * 64}),  # another key's record
        lambda r: json.dumps({**r, "winner": "a kernel that is not a candidate"}),
    ],
    ids=["garbled", "other-key", "unknown-winner"],
)
def test_a_damaged_record_is_ignored_and_rewritten(timer, tmp_path, monkeypatch, damage):
    timer.times = [3.0, 1.0]
    source, _ = tuned_seed()
    (path,) = records(tmp_path)
    record = json.loads(path.read_text())
    path.write_text(damage(record))
    monkeypatch.setattr(loader, "_MODULES", {})
    timer.calls = 0
    check_seed(load(source, "seed", interpret=True))
    assert timer.calls > 0  # tuned again
    assert json.loads(path.read_text())["winner"] == record["candidates"][1]


def test_a_failing_candidate_never_wins(timer, tmp_path):
    class Broken(Exception):
        pass

    def timer_failing_first(fn):
        timer.calls += 1
        if timer.calls == 1:
            raise Broken  # as a config that needs more shared memory than there is
        fn()
        return 2.0 if timer.calls == 2 else 5.0

    autotune.set_timer(timer_failing_first)
    _, module = tuned_seed()
    check_seed(module)
    record = json.loads(records(tmp_path)[0].read_text())
    assert record["ms"][0] == float("inf") and record["winner"] == record["candidates"][1]


def test_without_a_timer_the_heuristic_runs_and_nothing_is_recorded(isolated_runtime, tmp_path):
    """CPU tensors have nothing to time: the heuristic's candidate (the kernel as configured)."""
    _, module = tuned_seed()
    check_seed(module)
    assert records(tmp_path) == []


def test_tuning_waits_for_its_candidates_compiled():
    """The pool tunes a launch once all its candidates are compiled (here by the loading
    process alone: a pool of no workers), and every launch once."""
    events = []

    class FakeBinding:
        kernel = None  # (no source to guess a compile's length from: the module's order)

        def __init__(self, name):
            self.name = name

        def compile(self):
            events.append(("compiled", self.name))

    class FakeTuned:
        def __init__(self, name, bindings):
            self.name, self.bindings = name, bindings

        def choose(self):
            events.append(("tuned", self.name))

    a, b, c = FakeBinding("a"), FakeBinding("b"), FakeBinding("c")
    Pool(0).submit("m", "", "f", [a, b, c]).wait([FakeTuned("ab", [a, b]), FakeTuned("c", [c])])
    assert events == [
        ("compiled", "a"),
        ("compiled", "b"),
        ("tuned", "ab"),
        ("compiled", "c"),
        ("tuned", "c"),
    ]


def test_progress_bar_only_on_a_terminal():
    assert isinstance(progress(10, "tuning"), Silent)  # pytest captures stderr


def test_max_autotune_turns_tuning_on():
    options = resolve_options("max-autotune")
    assert options.autotune and options.cudagraphs
    pipeline = pipeline_of(options)
    assert "mm-templates{select=autotune}" in pipeline and "to-triton{autotune=true}" in pipeline
    assert pipeline_of(resolve_options("default")) == PIPELINE
    explicit = PIPELINE.replace("mm-templates", "mm-templates{select=template}")
    assert "select=template" in pipeline_of(resolve_options("max-autotune", {"pipeline": explicit}))


def test_cooperative_reductions_off_keeps_long_rows_looped():
    """`options={"cooperative_reductions": False}` sets to-triton's option, with tuning too."""
    off = {"cooperative_reductions": False}
    assert pipeline_of(resolve_options(options=off)).endswith("to-triton{cooperative=false}")
    tuned = pipeline_of(resolve_options("max-autotune", off))
    assert tuned.endswith("to-triton{autotune=true cooperative=false}")


def test_cooperative_candidates_are_timed_on_what_the_call_passes():
    """A cooperative candidate's kernel takes the workspace, semaphores and group count besides
    what the call passes, which its launcher adds: tuning makes buffers for the call's pointers
    only, whichever candidate comes first."""
    from mind.runtime.cooperative import Cooperation
    from mind.runtime.launch import I32, Binding

    call = (torch.float32, torch.float32)
    cooperative = Binding(None, torch.device("cpu"), (*call, torch.float32, torch.int32, I32),
                          (), {}, {}, Cooperation(4, 2))  # fmt: skip
    looped = Binding(None, torch.device("cpu"), call, (), {}, {})
    for first, second in [(cooperative, looped), (looped, cooperative)]:
        tuned = autotune.Tuned("k", [autotune.Candidate(first, (4, 8, 1)),
                                     autotune.Candidate(second, (8, 1, 1))], extents=(96, 64))  # fmt: skip
        assert [tuple(a.shape) for a in tuned.arguments()] == [(96,), (64,)]


@pytest.mark.parametrize("faster", ["template", "aten"])
def test_a_benchmark_chooses_template_or_aten(timer, tmp_path, monkeypatch, faster):
    """Under max-autotune, the matmul alone runs through the template and through ATen under the
    timer; the faster computes it in the compiled graph, and the answer is recorded."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    slower = {"template": "aten", "aten": "template"}[faster]
    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == slower else 1.0)[1])

    def fn(x, w):
        return (x @ w).relu()

    x, w = torch.randn(32, 24), torch.randn(24, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(fn, backend="mind", mode="max-autotune")(x, w)
    torch.testing.assert_close(out, fn(x, w))
    text = "".join(p.read_text() for p in (tmp_path / "dump").glob("*_forward.*.triton"))
    assert ("triton.dot" in text) == (faster == "template")
    assert ("triton.extern @aten.mm.default" in text) == (faster == "aten")
    winners = [json.loads(p.read_text()).get("winner") for p in records(tmp_path)]
    assert faster in winners


@pytest.mark.parametrize("template_ms, chosen", [(0.95, "aten"), (0.9, "template")])
def test_a_template_must_be_clearly_faster(timer, tmp_path, template_ms, chosen):
    """A template within TEMPLATE_MARGIN of ATen's time is no win: ATen stays (a 4% win in the
    probe was a loss in ViT's graph); the times are recorded either way."""
    autotune.set_timer(lambda fn: (fn(), template_ms if fn.__name__ == "template" else 1.0)[1])
    x, w = torch.randn(32, 24), torch.randn(24, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(lambda x, w: x @ w, backend="mind", mode="max-autotune")(x, w)
    torch.testing.assert_close(out, x @ w)
    (record,) = [r for p in records(tmp_path) if "problem" in (r := json.loads(p.read_text()))]
    assert record["winner"] == chosen and record["ms"] == {"template": template_ms, "aten": 1.0}


def test_matmuls_on_computed_arguments_are_benchmarked_in_training(timer, tmp_path):
    """The probe that times a matmul alone types its inputs as the call takes them: here a
    transposed weight and an activation, which have no layout before `realize`, in a training
    step's forward and backward (they fell back to eager, every graph, on a GPU)."""
    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == "aten" else 1.0)[1])
    lin = torch.nn.Linear(24, 16)
    x = torch.randn(32, 24, requires_grad=True)

    def fn(x):
        return torch.nn.functional.gelu(lin(x.tanh()))

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(fn, backend="mind", mode="max-autotune")(x)
        out.sum().backward()
    grads = x.grad, lin.weight.grad
    x.grad = lin.weight.grad = None
    fn(x).sum().backward()
    torch.testing.assert_close(out, fn(x))
    torch.testing.assert_close(grads, (x.grad, lin.weight.grad))
    assert "template" in [json.loads(p.read_text()).get("winner") for p in records(tmp_path)]


@pytest.mark.parametrize("faster", ["template", "aten"])
def test_the_probe_runs_what_the_graph_would(timer, tmp_path, monkeypatch, faster):
    """Attention scores of bf16 [b, s, h, d] tensors, cast to f32 and scaled: the probe's two
    programs take the bf16 tensors, as the graph does. The template reads them permuted, cast
    and scaled in its loads; ATen gets them copied into f32 operands. The winner's kernels are
    the ones the compiled graph runs."""
    from mind.target import triton

    from mind import tuning

    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    slower = {"template": "aten", "aten": "template"}[faster]
    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == slower else 1.0)[1])
    probes, made, random = [], [], tuning._random
    monkeypatch.setattr(triton, "emit", lambda module: probes.append(emit(module)) or probes[-1])
    monkeypatch.setattr(tuning, "_random", lambda t: made.append(str(t)) or random(t))

    def scores(q, k):
        b, s, _ = q.shape
        q = q.view(b, s, 4, 16).permute(0, 2, 1, 3).float() * 0.125
        return q @ k.view(b, s, 4, 16).permute(0, 2, 3, 1).float()

    q, k = (torch.randn(2, 32, 64, dtype=torch.bfloat16) for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(scores, backend="mind", mode="max-autotune")(q, k)
    torch.testing.assert_close(out, scores(q, k))
    assert made == ["bf16[2, 32, 64][2048, 64, 1]cpu"] * 2
    (source,) = [p.read_text() for p in (tmp_path / "dump").glob("*_forward.*.py")]
    kernel = re.compile(r"def (triton_\w+)\(.*?\n\n\n", re.S)
    template, aten = ([m[0] for m in kernel.finditer(p)] for p in probes[:2])
    assert any("tl.dot" in k for k in template) and "aten_bmm_default(" in probes[1]
    assert all(k in source for k in {"template": template, "aten": aten}[faster])
    assert ("tl.dot" in source) == (faster == "template")


def test_the_probe_computes_the_epilogue_a_template_would_take(timer, tmp_path, monkeypatch):
    """A GELU between two matmuls, stored for the second either way: the first matmul's probe
    computes it too, inside the template's kernel (its epilogue) against a kernel of its own
    after ATen's. A GELU that a reduction reads instead is left out: the graph could inline it
    there, which only ATen's side would pay for."""
    from mind.target import triton

    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == "aten" else 1.0)[1])
    probes = []
    monkeypatch.setattr(triton, "emit", lambda module: probes.append(emit(module)) or probes[-1])

    def fn(x, w1, w2):
        h = F.gelu(x @ w1)
        return h @ w2, F.gelu(x @ w2.t()).sum(-1)

    x, w1, w2 = torch.randn(32, 24), torch.randn(24, 40), torch.randn(40, 24)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(fn, backend="mind", mode="max-autotune")(x, w1, w2)
    torch.testing.assert_close(out, fn(x, w1, w2), rtol=1e-4, atol=1e-4)
    kernel = re.compile(r"def (triton_\w+)\(.*?\n\n\n", re.S)
    found = [[("tl.dot" in m[0], "erf" in m[0]) for m in kernel.finditer(p)] for p in probes[:6]]
    gelu_then_mm = [[(True, True)], [(False, True)]]  # the template; ATen's probe
    mm, gelu_then_sum = [[(True, False)], []], [[(True, False)], []]
    assert found == [*gelu_then_mm, *mm, *gelu_then_sum]


def test_a_problem_met_again_is_answered_without_compiling_its_probe(timer, monkeypatch):
    """Two matmuls of one problem (as a model's layers repeat theirs): the first's probe is
    compiled and timed, both ways; the second, the same graph but for its values' names, is
    answered from the record."""
    from mind.target import triton

    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == "aten" else 1.0)[1])
    probes = []
    monkeypatch.setattr(triton, "emit", lambda m: probes.append(m) or emit(m))

    def fn(x, y, w1, w2):
        return (x @ w1).relu(), (y.tanh() @ w2).relu()

    args = torch.randn(32, 24), torch.randn(32, 24), torch.randn(24, 16), torch.randn(24, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = torch.compile(fn, backend="mind", mode="max-autotune")(*args)
    torch.testing.assert_close(out, fn(*args))
    assert len(probes) == 3  # the first problem's probe, through the template and ATen; the graph


def test_the_autotune_log_says_what_was_timed_and_won(timer, tmp_path, capsys):
    """MIND_LOGS=autotune: each launch's winner among its candidates, each matmul's template
    against ATen, with their times."""
    import mind

    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == "aten" else 1.0)[1])
    x, w = torch.randn(32, 24), torch.randn(24, 16)
    mind.set_logs("autotune")
    try:
        out = torch.compile(lambda x, w: (x @ w).relu(), backend="mind", mode="max-autotune")(x, w)
    finally:
        mind.set_logs("")
    torch.testing.assert_close(out, (x @ w).relu())
    err = capsys.readouterr().err
    assert re.search(r"\[mind\.autotune\] aten\.mm\.default\(.*\): template \(template 1\.0000 ms, ATen 2\.0000 ms\)", err)  # fmt: skip
    assert re.search(r"\[mind\.autotune\] triton_tem_\w+: triton_tem_\w+\(.*\) in [\d.]+ ms of \d+ candidates", err)  # fmt: skip


def test_a_probe_that_fails_to_run_loses(timer, tmp_path):
    """A side of the probe that cannot run (a template too big for the device) loses to the
    other, and the compile goes on; where neither runs, ATen stays and nothing is recorded."""

    def failing(side):
        def timer(fn):
            if fn.__name__ in side:
                raise RuntimeError("out of resource: shared memory")
            fn()
            return 1.0

        return timer

    x, w = torch.randn(32, 24), torch.randn(24, 16)
    for side, kept in ((("template",), "aten"), (("template", "aten"), None)):
        torch._dynamo.reset()
        autotune.set_timer(failing(side))
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            out = torch.compile(lambda x, w: x @ w, backend="mind", mode="max-autotune")(x, w)
        torch.testing.assert_close(out, x @ w)
        winners = [json.loads(p.read_text()).get("winner") for p in records(tmp_path)]
        assert [w for w in winners if w in ("template", "aten")] == ([kept] if kept else [])
        for p in records(tmp_path):
            p.unlink()


MM_DUMP = """loops.graph @mm(%arg0_1: f32[32, 24][24, 1]cpu, %arg1_1: f32[24, 16][16, 1]cpu) {
  %mm = loops.extern @aten.mm.default(%arg0_1, %arg1_1) {input_strides = [[24, 1], [16, 1]]} : f32[32, 16][16, 1]cpu
  loops.output(%mm) {strides = [[16, 1]]}
}
"""


@pytest.mark.parametrize("faster", ["template", "aten"])
def test_mind_opt_reruns_the_benchmarked_choice_on_a_dump(timer, tmp_path, capsys, faster):
    """`mind-opt --pass=mm-templates{select=autotune}` on a dumped graph times the template
    against ATen as the backend does, and prints what won."""
    from mind.tools import mind_opt

    slower = {"template": "aten", "aten": "template"}[faster]
    autotune.set_timer(lambda fn: (fn(), 2.0 if fn.__name__ == slower else 1.0)[1])
    dump = tmp_path / "mm.loops"
    dump.write_text(MM_DUMP)
    assert mind_opt.main([str(dump), "--pass=mm-templates{select=autotune}"]) == 0
    out = capsys.readouterr().out
    assert ('template = "mm"' in out) == (faster == "template")
    assert ("loops.extern @aten.mm.default" in out) == (faster == "aten")
    winners = [json.loads(p.read_text())["winner"] for p in records(tmp_path)]
    assert [w for w in winners if w in ("template", "aten")] == [faster]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a machine without a GPU")
def test_mind_opt_keeps_aten_for_a_gpu_dump_where_there_is_no_gpu(tmp_path, capsys):
    from mind.tools import mind_opt

    dump = tmp_path / "mm.loops"
    dump.write_text(MM_DUMP.replace("cpu", "cuda:0"))
    assert mind_opt.main([str(dump), "--pass=mm-templates{select=autotune}"]) == 0
    assert "loops.extern @aten.mm.default" in capsys.readouterr().out


def test_without_a_timer_max_autotune_keeps_aten(isolated_runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    x, w = torch.randn(32, 24), torch.randn(24, 16)
    out = torch.compile(lambda x, w: x @ w, backend="mind", mode="max-autotune")(x, w)
    torch.testing.assert_close(out, x @ w)
    text = "".join(p.read_text() for p in (tmp_path / "dump").glob("*_forward.*.triton"))
    assert re.search(r"triton\.extern @aten\.mm\.default", text)
