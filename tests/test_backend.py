"""torch.compile(backend="mind"): results match eager, every stage dumps as IR that round-trips,
and a graph that fails anywhere runs eagerly with exactly one MindFallbackWarning."""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from mind.passes.fuse import Fuse
from mind.runtime import loader
from programs import no_fallback
from test_runtime import BROKEN_SOURCE, SEED_SOURCE, seed
from torch._dynamo.backends.registry import lookup_backend

import mind
from mind import MindFallbackWarning, backend, collector, runtime

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


def test_failing_pass_warns_once_at_the_callers_line_and_runs_eagerly(monkeypatch):
    def broken(self, graph):
        raise RuntimeError("fuse is broken")

    monkeypatch.setattr(Fuse, "run_graph", broken)
    inputs = seed_inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(seed, backend="mind")(*inputs)  # the line the warning names
    line = inspect.currentframe().f_lineno - 1
    warned = [w for w in caught if issubclass(w.category, MindFallbackWarning)]
    torch.testing.assert_close(out, seed(*inputs))
    assert len(warned) == 1
    assert (warned[0].filename, warned[0].lineno) == (__file__, line)
    message = str(warned[0].message)
    assert message.startswith("mind: graph 'graph") and "RuntimeError: fuse is broken" in message
    path = reproducer(message)  # the last good IR, in the one documented place
    assert path.parent == runtime.cache_dir() / "reproducers"
    assert path.name.startswith("graph0_forward.") and path.name.endswith(".schedule.scheduled")
    assert str(mind.parse(path.read_text())) == path.read_text()
    torch._dynamo.reset()  # the same failure in a new process: the same file, nothing new
    monkeypatch.setattr(backend, "_GRAPH_NAMES", (f"graph{i}" for i in itertools.count()))
    run(seed, *inputs)
    assert list(path.parent.iterdir()) == [path]


def test_mind_traceback_ends_the_fallback_warning_with_what_failed(monkeypatch):
    def broken(self, graph):
        raise RuntimeError("fuse is broken")

    monkeypatch.setattr(Fuse, "run_graph", broken)
    _, (plain,) = run(seed, *seed_inputs())
    assert "\n" not in plain
    torch._dynamo.reset()
    monkeypatch.setenv("MIND_TRACEBACK", "1")
    _, (traced,) = run(seed, *seed_inputs())
    head, tail = traced.split("\n", 1)
    assert re.fullmatch(
        r"mind: graph '\w+' runs eagerly: RuntimeError: fuse is broken \(.*\)", head
    )
    assert tail.startswith("Traceback (most recent call last):")
    assert "in broken" in tail and tail.endswith("RuntimeError: fuse is broken")


def test_reproducer_of_a_pass_failing_midway_is_the_ir_before_it(monkeypatch):
    from mind.parser import parse
    from mind.passes import fuse, run_pipeline

    def broken(graph, *options):
        graph.body.ops[0].erase()  # leaves the IR broken, as a pass failing halfway may
        raise RuntimeError("fuse broke")

    aten = mind.capture(seed, *seed_inputs(), stage="aten")
    monkeypatch.setattr(fuse, "fuse_graph", broken)
    out, warned = run(seed, *seed_inputs())
    assert len(warned) == 1 and "fuse broke" in warned[0]
    path = reproducer(warned[0])
    expected = run_pipeline(aten, "lower,realize,inline,schedule")
    expected.ops[0].symbol = path.name.split(".")[0]
    assert path.suffix == ".scheduled" and path.read_text() == str(expected)
    assert str(parse(path.read_text())) == path.read_text()


def test_kernel_failing_at_first_call_warns_once_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(backend, "generate", lambda *args: BROKEN_SOURCE)
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


def seed_twice_over_a_graph_break(a, b, c):
    out = seed(a, b, c)
    print(end="")  # a graph break: Dynamo's resume function runs the rest
    return out * 2


def test_first_call_failures_warn_at_the_callers_line(monkeypatch):
    """Graphs that fail at their first call warn at the line that called the compiled function,
    past the frames torch runs in between: Dynamo's bytecode for the user's function and its
    resume function (the user's file, at the lines they traced) and AOTAutograd's generated
    wrappers (no module)."""
    monkeypatch.setattr(backend, "generate", lambda *args: BROKEN_SOURCE)
    inputs = seed_inputs()
    compiled = torch.compile(seed_twice_over_a_graph_break, backend="mind")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(*inputs)  # the line the warnings name
    line = inspect.currentframe().f_lineno - 1
    torch.testing.assert_close(out, seed(*inputs) * 2)
    warned = [w for w in caught if issubclass(w.category, MindFallbackWarning)]
    assert [(w.filename, w.lineno) for w in warned] == [(__file__, line)] * 2


def test_warning_at_a_line_of_a_module_run_with_python_m():
    """A module run with `python -m pkg.mod` is named `__main__` but its loader `pkg.mod`: a
    warning at its line is recorded there (the loader refuses to give that name's source, which
    crashed the fallback of any graph the module compiled)."""
    from importlib.machinery import SourceFileLoader

    from mind.ir.diagnostics import warn_at_user

    namespace = {"__name__": "__main__", "__loader__": SourceFileLoader("pkg.mod", __file__)}
    namespace |= {"warn_at_user": warn_at_user, "MindFallbackWarning": MindFallbackWarning}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile("warn_at_user('why', MindFallbackWarning)", "/pkg/mod.py", "exec"), namespace)
    assert [(w.filename, w.lineno, str(w.message)) for w in caught] == [("/pkg/mod.py", 1, "why")]


def test_generated_program_runs(monkeypatch):
    monkeypatch.setattr(backend, "generate", lambda *args: SEED_SOURCE)
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


def test_seed_matches_eager():
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


def test_dump_dir_writes_every_stage_in_pipeline_order_as_round_tripping_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    run(seed, *seed_inputs())
    files = sorted((tmp_path / "dump").iterdir())
    assert {f.suffix[1:] for f in files} >= {*STAGES, "dot"}
    names = [f.name for f in files if f.suffix != ".svg"]  # (.svg: where Graphviz is)
    assert names == [
        "graph0.00.fx",
        "graph0_forward.00.aten",
        "graph0_forward.01.channels-last.aten",
        "graph0_forward.02.lower.loops",
        "graph0_forward.03.mm-templates.loops",
        "graph0_forward.04.realize.loops",
        "graph0_forward.05.inline.loops",
        "graph0_forward.06.mm-epilogues.loops",
        "graph0_forward.07.schedule.scheduled",
        "graph0_forward.08.fuse.scheduled",
        "graph0_forward.09.cse.scheduled",
        "graph0_forward.10.merge-loops.scheduled",
        "graph0_forward.11.online-softmax.scheduled",
        "graph0_forward.12.welford.scheduled",
        "graph0_forward.13.split-reductions.scheduled",
        "graph0_forward.14.reorder-collectives.scheduled",
        "graph0_forward.15.combo-kernels.scheduled",
        "graph0_forward.16.scheduled.dot",
        "graph0_forward.17.to-triton.triton",
        "graph0_forward.18.py",
    ]
    assert "digraph mind {" in (tmp_path / "dump" / names[17]).read_text()
    for f in files:
        if f.suffix in (".fx", ".aten", ".loops", ".scheduled", ".triton"):
            text = f.read_text()
            assert str(mind.parse(text, f.name)) == text, f.name


def test_backward_recomputes_a_gelu_from_its_input(tmp_path, monkeypatch):
    """The joint graph splits as Inductor's does (torch's min-cut partitioner): the forward saves
    the matmul's output, and the backward recomputes the tanh GELU's intermediates from it,
    rather than the forward writing each of them (tanh, pow, ...) for the backward to read."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = torch.randn(8, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)

    def fn(x, w):  # transformers' NewGELU, written out: autograd saves each intermediate
        h = x @ w
        return 0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))

    with no_fallback():
        torch.compile(fn, backend="mind")(x, w).sum().backward()
    got = x.grad, w.grad
    x.grad = w.grad = None
    fn(x, w).sum().backward()
    torch.testing.assert_close(got, (x.grad, w.grad))
    (text,) = [p.read_text() for p in tmp_path.glob("*_backward.00.aten")]
    inputs = re.findall(r"%(\w+):", text.splitlines()[0])
    # the matmul's output, and the transposed inputs its gradients take (views, no copies)
    saved = [n for n in inputs if not n.startswith(("primals_", "tangents_", "permute"))]
    assert saved == ["mm"], inputs


@pytest.mark.parametrize("lazy", [False, True], ids=["with-the-forward", "in-backward"])
def test_dynamo_traces_nothing_of_minds_in_a_compiled_training_step(lazy, tmp_path, monkeypatch):
    """`loss.backward()` inside a compiled step runs mind's backward (and, without AOTAutograd's
    cache, as when dumping, compiles it there) in a frame Dynamo traces. Dynamo traced mind's
    compiler (warning of `time.time_ns`, the compile timer's) and the compiled graph's call,
    breaking a graph at each; Inductor's graphs give no such break."""
    from torch._dynamo.utils import counters

    if lazy:
        monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    model = torch.nn.Linear(8, 4)
    reference = torch.nn.Linear(8, 4)
    reference.load_state_dict(model.state_dict())
    x = torch.randn(3, 8)

    def step(m, x):
        loss = m(x).sum()
        loss.backward()
        return loss

    counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(step, backend="mind")(model, x)
    assert [str(w.message) for w in caught] == []
    breaks = [reason.split("\n")[0] for reason in counters["graph_break"]]
    assert breaks == ["Unsupported Tensor.backward() call"]
    step(reference, x)
    torch.testing.assert_close(model.weight.grad, reference.weight.grad)
    assert bool(list(tmp_path.glob("*_backward.00.aten"))) == lazy


def test_every_dump_reloads(tmp_path, monkeypatch):
    """An fx graph that calls `getattr` (torch names it without its module) dumps as
    `@builtins.getattr`; an ATen op that returns nothing (`_assert_scalar`) has no result."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    fn, x = (lambda x: torch.view_as_complex(x).real * 2), torch.randn(4, 3, 2)
    torch.testing.assert_close(run(fn, x)[0], fn(x))
    dumped = [f for f in tmp_path.iterdir() if f.suffix in (".fx", ".aten", ".loops")]
    assert "@builtins.getattr(" in next(f for f in dumped if f.suffix == ".fx").read_text()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        aten = mind.capture(lambda x: x[x > 0].sum() + 1, torch.randn(8), stage="aten")
    assert "  aten._assert_scalar.default(" in str(aten)
    texts = [(f.name, f.read_text()) for f in dumped] + [("assert.aten", str(aten))]
    for name, text in texts:
        assert str(mind.parse(text, name)) == text, name


def test_complex_numbers_in_a_graph_match_eager_without_fallback():
    """A complex scalar (`z * 2j`, `torch.full(.., 1 + 2j)`) is an argument the IR writes as
    `@builtins.complex(re, im)`: the graph fell back, the argument having no text."""
    x = torch.randn(8, 32)
    programs = (
        lambda x: torch.view_as_real(torch.view_as_complex(x.view(8, 16, 2)) * 2j).sum(-1),
        lambda x: torch.view_as_real(torch.full((3,), 1 + 2j)) + x[:3, :2],
    )
    for fn in programs:
        torch._dynamo.reset()
        out, warned = run(fn, x)
        assert warned == []
        torch.testing.assert_close(out, fn(x))


def test_symbolic_sizes_match_eager_without_fallback():
    compiled = torch.compile(seed, backend="mind", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows, cols in ((4, 128), (6, 32)):
            inputs = tuple(torch.randn(rows, cols) for _ in range(3))
            torch.testing.assert_close(compiled(*inputs), seed(*inputs))
    assert not [w for w in caught if issubclass(w.category, MindFallbackWarning)]


def test_a_process_whose_graphs_come_from_the_cache_imports_no_pass():
    """The default pipeline is checked here, not at each start: the check imports every pass
    (0.38 s of a warm first call on an H100 host), and a graph found in the cache runs none.
    What the backend imports before it knows whether to compile: options, capture, to-aten."""
    from mind.options import PIPELINE, check_pipeline

    check_pipeline(PIPELINE, "PIPELINE")  # brings aten IR to triton IR, or raises
    code = (
        "import sys, mind.backend, mind.passes.to_aten, mind.passes.attention_masks\n"
        "from mind.options import resolve_options\n"
        "resolve_options(); resolve_options('max-autotune')\n"
        "print(sorted(m for m in sys.modules if m.startswith('mind.passes.')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "MIND_PIPELINE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split("\n")[-2] == str(
        ["mind.passes.attention_masks", "mind.passes.manager", "mind.passes.to_aten"]
    ), out.stderr


def test_pipeline_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("MIND_PIPELINE", "lower,realize,inline,schedule,to-triton")
    used = []
    generate = backend.generate
    monkeypatch.setattr(
        backend,
        "generate",
        lambda g, d, passes, *a: used.append(passes) or generate(g, d, passes, *a),
    )
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == [] and [p.name for p in used[0]] == [
        "lower",
        "realize",
        "inline",
        "schedule",
        "to-triton",
    ]
    torch.testing.assert_close(out, seed(*inputs))


@pytest.mark.parametrize(
    ("pipeline", "error"),
    [
        ("lower,fusee", "MIND_PIPELINE:1:7: error: unknown pass 'fusee'"),
        ("lower realize", "MIND_PIPELINE:1:7: error: malformed pipeline: expected ','"),
        ("lower,realize", "MIND_PIPELINE: the pipeline must end at triton IR, not loops IR"),
    ],
)
def test_a_bad_mind_pipeline_is_an_error_not_a_fallback(monkeypatch, pipeline, error):
    monkeypatch.setenv("MIND_PIPELINE", pipeline)
    with pytest.raises(Exception, match=re.escape(error)):
        torch.compile(seed, backend="mind")(*seed_inputs())


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune",
                                  "max-autotune-no-cudagraphs"])  # fmt: skip
def test_modes_compile_and_match_eager(mode):
    """On CPU tensors there is nothing to record: every mode runs the compiled kernels."""
    inputs = seed_inputs()
    out, warned = run(seed, *inputs, mode=mode)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "fast"}, "unknown mode 'fast' (modes: default, reduce-overhead, max-autotune, "
                           "max-autotune-no-cudagraphs)"),
        ({"options": {"cuda_graphs": True}}, "unknown option 'cuda_graphs' (options: cudagraphs, "
                                             "cudagraph_max_shapes, cudagraph_max_recordings, "
                                             "pipeline, autotune, layout_optimization, "
                                             "emulate_precision_casts, attention_masks, "
                                             "cooperative_reductions)"),
        ({"options": {"cudagraphs": 1}}, "option 'cudagraphs' takes a bool, not int (1)"),
    ],
)  # fmt: skip
def test_bad_mode_or_option_is_an_error_naming_the_valid_ones(kwargs, error):
    """A caller's mistake raises (through Dynamo) instead of quietly running eagerly."""
    with pytest.raises(Exception, match=re.escape(error)):
        torch.compile(seed, backend="mind", **kwargs)(*seed_inputs())


@pytest.mark.usefixtures("without_aot_cache")
def test_graph_cache_serves_a_new_process_without_running_passes(monkeypatch):
    inputs = seed_inputs()
    out, warned = run(seed, *inputs)
    assert warned == []

    def no_passes(*args):
        raise AssertionError("the passes ran on a cached graph")

    monkeypatch.setattr(loader, "_MODULES", {})  # a new process: only the disk is left
    monkeypatch.setattr(backend, "generate", no_passes)
    torch._dynamo.reset()
    out, warned = run(seed, *inputs)
    assert warned == []
    torch.testing.assert_close(out, seed(*inputs))


@pytest.mark.usefixtures("without_aot_cache")
@pytest.mark.parametrize("damage", ["graph entry", "module"])
def test_damaged_graph_cache_compiles_again(monkeypatch, damage):
    inputs = seed_inputs()
    run(seed, *inputs)
    cache = runtime.cache_dir()
    (entry,) = [p for p in (cache / "graphs").rglob("*") if p.is_file()]
    if damage == "module":  # still Python, but not what the key says: never trusted
        key = entry.read_text().strip()
        module = cache / key[:2] / f"{key}.py"
        module.write_text(module.read_text().replace("XBLOCK=1,", "XBLOCK=2,"))
    else:
        entry.write_text("not a key")
    generated = []
    generate = backend.generate
    monkeypatch.setattr(loader, "_MODULES", {})
    monkeypatch.setattr(backend, "generate", lambda *a: generated.append(1) or generate(*a))
    torch._dynamo.reset()
    out, warned = run(seed, *inputs)
    assert warned == [] and generated == [1]
    torch.testing.assert_close(out, seed(*inputs))


@pytest.mark.parametrize("shape", [(4, 8), (64, 300), (2, 5000)], ids=["tiny", "rows", "looped"])
def test_bf16_sums_accumulate_in_f32(shape):
    """A bf16 running sum drops a long row's small terms; mind adds in f32 and rounds once."""
    x = torch.randn(*shape, dtype=torch.bfloat16)
    out, warned = run(lambda x: (x.sum(-1), x.sum(0)), x)
    assert warned == []
    for got, want in zip(out, (x.float().sum(-1), x.float().sum(0))):
        torch.testing.assert_close(got.float(), want, rtol=2**-7, atol=2**-7)


def test_bf16_constants_run():
    """A masked bf16 softmax fills with -inf in bf16 (the interpreter makes it from f32)."""
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    mask = torch.rand(4, 16) > 0.3
    fn = lambda x, m: torch.softmax(x.masked_fill(~m, float("-inf")), -1)  # noqa: E731
    out, warned = run(fn, x, mask)
    assert warned == []
    torch.testing.assert_close(out, fn(x, mask), rtol=2e-2, atol=2e-2)


def _quiet_now(count=None) -> bool:
    """The collector is quiet: the heap frozen (`count`: how frozen objects are counted, where a
    test counts the calls of `gc.get_freeze_count`), or the collector paused."""
    import gc

    return (count or gc.get_freeze_count)() > 0 or not gc.isenabled()


@pytest.mark.parametrize("program_froze", [False, True])
def test_compiling_quiets_the_collector_and_puts_it_back(monkeypatch, program_froze):
    """While a graph compiles, the objects that existed before are frozen (full collections scan
    only what the compile made), and unfrozen after. Where the program froze objects itself
    (unfreezing would release them too), the collector is paused instead, and resumed after."""
    import gc

    calls, during = [], []
    for name in ("freeze", "unfreeze", "disable", "enable"):
        real = getattr(gc, name)
        monkeypatch.setattr(gc, name, lambda real=real, name=name: calls.append(name) or real())
    load_program = backend.load_program
    monkeypatch.setattr(
        backend, "load_program", lambda *a: during.append(_quiet_now()) or load_program(*a)
    )
    if program_froze:
        gc.freeze()
    froze_before = gc.get_freeze_count() > 0  # (a Python may have frozen objects at start-up)
    try:
        out, warned = run(seed, *seed_inputs())
        frozen_after, enabled_after = gc.get_freeze_count() > 0, gc.isenabled()
        made = calls[int(program_froze) :]  # (the passes pause the collector inside a freeze)
    finally:
        if program_froze:
            gc.unfreeze()
    assert (
        warned == [] and during == [True] and (frozen_after, enabled_after) == (froze_before, True)
    )
    if froze_before:
        assert made == ["disable", "enable"]
    else:  # frozen again when mind's backend starts, and when its graph compiles
        freezes = [c for c in made if c.endswith("freeze")]
        assert freezes == ["freeze"] * (len(freezes) - 1) + ["unfreeze"] and len(freezes) > 2


def test_a_quiet_block_inside_another_neither_counts_nor_undoes(monkeypatch):
    """The collector stays quiet until the outermost block ends, and only that one counts the
    frozen objects (a walk over all of them). An inner block freezes what was made since."""
    import gc

    count = gc.get_freeze_count
    before = (count() > 0, gc.isenabled())
    counts = []
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counts.append(1) or count())
    with collector.quiet():
        assert _quiet_now(count)
        frozen, made = count(), [[] for _ in range(1000)]
        with collector.quiet():
            assert _quiet_now(count)
            # frozen objects that die leave the count (another thread may free some meanwhile)
            assert count() >= frozen + len(made) // 2 or before[0]  # (paused: nothing to freeze)
        assert _quiet_now(count)
    assert counts == [1] and (count() > 0, gc.isenabled()) == before


def test_dynamos_compiles_run_quiet_also_after_a_reset():
    """Dynamo's compile of a frame, its trace included, runs with the collector quiet (a full
    collection during a transformer's trace scanned all of torch: 0.2-0.4 s of its first call),
    restored when the compile ends. `torch._dynamo.reset()` clears Dynamo's callbacks, and
    mind's come back: the first trace after a reset is quiet too (it was not)."""
    import gc

    handler = torch._dynamo.callback_handler
    before = (gc.get_freeze_count() > 0, gc.isenabled())
    seen = []

    def watch():
        handler.register_start_callback(lambda _: seen.append(("start", _quiet_now())))
        handler.register_end_callback(lambda _: seen.append(("end", _quiet_now())))

    watch()
    out, warned = run(seed, *seed_inputs())
    assert warned == [] and seen == [("start", True), ("end", before[0])]
    assert (gc.get_freeze_count() > 0, gc.isenabled()) == before
    torch._dynamo.reset()
    seen.clear()
    watch()
    torch.compile(lambda x: x.exp(), backend="eager")(torch.ones(4))
    assert seen == [("start", True), ("end", before[0])]
    assert (gc.get_freeze_count() > 0, gc.isenabled()) == before


def test_a_bf16_gradient_whose_terms_cancel_is_what_f32_leaves():
    """normalize(x, p=0.5) over a dim of size 1 is sign(x), its gradient 0: two terms of about
    cotangent / |x| cancel (OpInfo's normalize, sample 2). A product `realize` made a buffer
    and `fuse` then removed, and two `where`s, were rounded to bf16 between them: the gradient
    was 0.1 off, eager's 0.03. Fused away, and selected in f32, they stay f32."""

    def fn(x):
        return torch.nn.functional.normalize(x, p=0.5, dim=0)

    x = torch.randn(1, 2, 4, 5, generator=torch.Generator().manual_seed(0)).bfloat16()
    cotangent = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).bfloat16()
    x.requires_grad_()
    (grad,) = torch.autograd.grad(torch.compile(fn, backend="mind")(x), x, cotangent)
    assert grad.abs().max().item() < 1e-4


def test_a_fused_bf16_chain_rounds_where_it_stores_unless_told_to_emulate_eager():
    """`x * 0.3 + 1` in bf16 is one kernel. Eager rounds the product to bf16 before adding; the
    kernel adds in f32 and rounds once, as Inductor's does, unless `emulate_precision_casts`
    has it round op by op. The two roundings differ on some of these inputs."""

    def fn(x):
        return x * 0.3 + 1.0

    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)).bfloat16()
    eager, once = fn(x), (x.float() * 0.3 + 1.0).bfloat16()
    assert not torch.equal(eager, once)
    out, warned = run(fn, x)
    assert warned == [] and torch.equal(out, once)
    torch._dynamo.reset()
    out, warned = run(fn, x, options={"emulate_precision_casts": True})
    assert warned == [] and torch.equal(out, eager)


def test_a_bf16_sum_adds_its_fused_terms_unrounded_unless_told_to_emulate_eager():
    """`(x * y).sum(1)` in bf16 is one reduction kernel adding in f32. Its products stay f32, as
    Inductor's do (OpInfo's multilabel_soft_margin_loss, sizes dynamic, rounded its products to
    bf16 before the sum: 3.95 where f64 gives 4.07), so the sum rounds once; eager rounds each
    product first, and `emulate_precision_casts` has the kernel do so too."""

    def fn(x, y):
        return (x * y).sum(1)

    gen = torch.Generator().manual_seed(0)
    x, y = (torch.randn(8, 256, generator=gen).bfloat16() for _ in range(2))
    once = (x.float() * y.float()).sum(1).bfloat16()
    rounded = (x * y).float().sum(1).bfloat16()
    assert not torch.equal(once, rounded)
    out, warned = run(fn, x, y)
    assert warned == [] and torch.equal(out, once)
    torch._dynamo.reset()
    out, warned = run(fn, x, y, options={"emulate_precision_casts": True})
    assert warned == [] and torch.equal(out, rounded)


def test_an_argmax_picks_among_the_values_as_eager_rounds_them():
    """argmax(x * 0.3) in bf16: 3.328125 and 3.34375 both give 1.0 rounded, 0.998 and 1.003 not,
    and eager's argmax picks the first of the tie. Inlined into the argmax, the product keeps
    its rounding (Inductor's drops it and picks the second); the max itself is the same."""

    def fn(x):
        y = x * 0.3
        return y.argmax(-1), y.amax(-1)

    x = torch.tensor([[1.0, 3.328125, 3.34375, 0.5] * 16]).bfloat16()
    assert fn(x)[0].item() == 1
    (index, top), warned = run(fn, x)
    assert warned == [] and index.item() == 1 and torch.equal(top, fn(x)[1])
