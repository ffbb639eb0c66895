"""On a CUDA GPU: split reductions, Welford, matmul templates, autotuning and fusions through
reordered loops compiled for the device (not interpreted), against eager, with no fallback.
Skipped without CUDA."""

from __future__ import annotations

import json
import logging
import math
import time

import pytest
import torch
import torch.nn.functional as F
from programs import no_fallback
from test_loop_order import PROGRAMS as REORDERED

from mind.options import PIPELINE

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.usefixtures("isolated_runtime"),
]

TEMPLATES = PIPELINE.replace("mm-templates", "mm-templates{select=template}")


@pytest.fixture(autouse=True)
def compiled_for_the_gpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def compiled(fn, *args, **kwargs):
    torch._dynamo.reset()
    with no_fallback():
        return torch.compile(fn, backend="mind", **kwargs)(*args)


def close(got, want, tol):
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g.double(), w.double(), rtol=tol, atol=tol)


def test_split_reductions():
    """A full sum, a column sum and per-channel statistics: too few rows for 132 SMs."""

    def fn(x, y, z):
        return (
            x.sum(),
            y.sum(0),
            torch.var_mean(z, (0, 2, 3), correction=0),
            y.to(torch.bfloat16).sum(0),
        )

    x, y, z = (
        torch.randn(2**22, device="cuda"),
        torch.randn(8192, 256, device="cuda"),
        torch.randn(32, 8, 56, 56, device="cuda") * 3 + 50,
    )
    close(compiled(fn, x, y, z), fn(x.double(), y.double(), z.double()), 1e-3)


def test_welford_looped_layer_norm():
    x = torch.randn(64, 4096, device="cuda") * 2 + 100
    fn = lambda x: F.layer_norm(x, (4096,))  # noqa: E731
    close(compiled(fn, x), fn(x.double()), 1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_templates(dtype):
    def fn(x, w, b, r):
        return F.gelu(x @ w + b) + r, torch.bmm(
            x[None].expand(3, -1, -1), w[None].expand(3, -1, -1)
        )

    args = [
        torch.randn(s, device="cuda", dtype=dtype)
        for s in ((300, 200), (200, 130), (130,), (300, 130))
    ]
    got = compiled(fn, *args, options={"pipeline": TEMPLATES})
    close(got, fn(*args), 1e-2 if dtype == torch.float32 else 5e-2)


def test_max_autotune_tunes_and_records(tmp_path):
    """max-autotune on the GPU: kernels and the matmul's template against cuBLAS are timed, the
    winners recorded in the tuning cache; a second process-like compile reads them back."""

    def fn(x, w):
        return torch.softmax(x @ w, -1), x.sum(0)

    x, w = torch.randn(512, 256, device="cuda"), torch.randn(256, 384, device="cuda")
    close(compiled(fn, x, w, mode="max-autotune"), fn(x, w), 1e-3)
    records = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "tuning").glob("*.json")]
    assert any(r.get("winner") in ("template", "aten") for r in records)
    assert any(isinstance(r.get("ms"), list) and len(r["ms"]) > 1 for r in records)
    close(compiled(fn, x, w, mode="max-autotune"), fn(x, w), 1e-3)


def test_the_tuning_timer_times_the_device_not_the_host():
    """A run whose host idles 2 ms before it launches a small kernel times as the kernel does
    (do_bench timed the idle GPU too, which made slow-launching ATen ops lose to templates)."""
    from mind.runtime.gpu_timer import gpu_time

    x = torch.zeros(1 << 20, device="cuda")

    def launch() -> None:
        x.add_(1)

    def launch_late() -> None:
        time.sleep(0.002)
        x.add_(1)

    late, prompt = gpu_time(launch_late), gpu_time(launch)
    assert late < 0.5 and prompt < 0.5, (late, prompt)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", REORDERED)
def test_reordered_loops_fuse(name, dtype, tmp_path, monkeypatch):
    """tests/test_loop_order.py's programs at about 2**24 elements: fuse makes one node of each,
    with eager's values, or two where the only refusal is fuse's `split` rule (a column
    reduction too few rows wide to fill the GPU splits, and takes no work stored along its
    rows), never one of loop order."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
    refusals = []  # (not caplog: the GPU machine runs pytest with -p no:logging)
    keep = logging.Handler(logging.DEBUG)
    keep.emit = lambda record: refusals.append(record.getMessage())
    fusion = logging.getLogger("mind.fusion")
    level = fusion.level
    fusion.setLevel(logging.DEBUG)
    fusion.addHandler(keep)
    fn, calls = REORDERED[name]
    most = max(math.prod(shape) for shape in calls[0])
    scale = int((2**24 / most) ** (1 / max(len(shape) for shape in calls[0])))
    args = [
        torch.randn([s * scale for s in shape], device="cuda", dtype=dtype) for shape in calls[0]
    ]
    try:
        close(compiled(fn, *args), fn(*args), 1e-3 if dtype == torch.float32 else 3e-2)
    finally:
        fusion.removeHandler(keep)
        fusion.setLevel(level)
    (fused,) = (tmp_path / "dump").glob("*.fuse.scheduled")
    nodes = fused.read_text().count("scheduled.node @")
    refused = [m for m in refusals if "not fused" in m]
    assert nodes == 1 or (
        nodes == 2 and refused and all("splits its reduction" in m for m in refused)
    )


@pytest.mark.parametrize("act", [torch.relu, lambda h: F.gelu(h, approximate="tanh")])
def test_a_folded_activation_keeps_eager_results_and_nans(act):
    """mm-epilogues runs a Linear's tanh-GELU in cuBLASLt's epilogue (aten._addmm_activation),
    and not its ReLU (that epilogue turns a NaN into 0): results are eager's to bf16's rounding,
    and a row of NaN inputs gives NaN, as torch.relu and gelu give it."""
    torch.manual_seed(0)
    fc = torch.nn.Linear(768, 3072, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(512, 768, device="cuda", dtype=torch.bfloat16)
    x[3] = float("nan")
    with torch.no_grad():
        got = compiled(lambda x: act(fc(x)), x)
        want = act(F.linear(x.float(), fc.weight.float(), fc.bias.float()))
    assert torch.equal(got.isnan(), want.isnan())
    close(got.nan_to_num(), want.nan_to_num(), 2e-2)


def test_a_long_row_softmax():
    """Rows of 65536 compile for the device at 32 warps, the normalizing loop walking each row
    last to first (lit_tests/triton/long_rows.scheduled shows the config)."""
    x = torch.randn(64, 65536, device="cuda") * 4
    close(compiled(lambda x: torch.softmax(x, -1), x), torch.softmax(x, -1), 1e-6)


def _masked_tail(x):
    """Each row's last two thirds -inf: whole chunks of a cooperative row hold nothing else."""
    keep = torch.arange(x.shape[-1], device=x.device) < x.shape[-1] // 3
    return torch.where(keep, x, float("-inf"))


#: rows a cooperative kernel splits between programs (codegen/cooperative.py): many rows, rows
#: that end inside a chunk and outnumber the groups unevenly, chunks of -inf alone, a Welford
#: variance, bf16 rows
COOPERATIVE = {
    "softmax": (lambda x: torch.softmax(x, -1), (1024, 65536), 1e-6),
    "ragged": (lambda x: torch.softmax(x, -1), (300, 50000), 1e-6),
    "masked_log_softmax": (lambda x: torch.log_softmax(_masked_tail(x), -1), (512, 65536), 1e-5),
    "layer_norm": (lambda x: F.layer_norm(x, x.shape[-1:]), (512, 65536), 1e-4),
    "bf16": (lambda x: torch.softmax(x.to(torch.bfloat16), -1), (512, 65536), 1e-2),
}


@pytest.mark.parametrize("name", list(COOPERATIVE))
def test_cooperative_reductions(name, tmp_path, monkeypatch):
    """Each row read once by programs that merge their chunks' partials at barriers: eager's
    numbers on two calls (the semaphores are left ready for the next)."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    fn, shape, tol = COOPERATIVE[name]
    x = torch.randn(*shape, device="cuda") * 4
    torch._dynamo.reset()
    with no_fallback():
        step = torch.compile(fn, backend="mind")
        first, second = step(x), step(x)
    want = fn(x.double())
    close(first, want, tol)
    close(second, want, tol)
    assert any("triton_coop_" in p.read_text() for p in tmp_path.glob("*.py"))


def test_a_cooperative_softmax_rescales_its_chunks_exp(tmp_path, monkeypatch):
    """The cooperative softmax divides its chunks' exp, rescaled to the row's max, by the row's
    sum (codegen/online_softmax.py `_normalized`): eager's numbers, nan where eager's are, on rows
    with chunks of -inf alone, a row of -inf alone, a row holding +inf and one holding nan; an
    exp also returned unnormalized is computed from the row, not rescaled."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = _masked_tail(torch.randn(512, 65536, device="cuda") * 4)
    x[1], x[2, 5], x[3, 7] = float("-inf"), float("inf"), float("nan")

    def fn(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return torch.softmax(x, -1), e, e / e.sum(-1, keepdim=True)

    torch._dynamo.reset()
    with no_fallback():
        got = torch.compile(fn, backend="mind")(x)
    for g, w in zip(got, fn(x.double())):
        torch.testing.assert_close(g.double(), w, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert any("triton_coop_" in p.read_text() for p in tmp_path.glob("*.py"))


@pytest.mark.parametrize("columns", [16384, 65536])
def test_max_autotune_times_cooperative_against_looped(columns, tmp_path):
    """Under max-autotune a long row's launch times its cooperative and looped kernels (whose
    arguments differ by what the cooperative launcher adds) and runs the winner: eager's
    numbers on two calls, and the cooperative candidate among those timed. (Rows enough to
    fill the GPU: fewer would keep the normalization apart, for a split, as fuse's "split" rule
    does.)"""
    x = torch.randn(1024, columns, device="cuda") * 4
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    want = fn(x.double())
    for _ in range(2):
        close(compiled(fn, x, mode="max-autotune-no-cudagraphs"), want, 1e-6)
    records = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "tuning").glob("*.json")]
    timed = [r for r in records if any("triton_coop_" in c for c in r.get("candidates", []))]
    assert timed and all(math.isfinite(min(r["ms"])) for r in timed)


def test_cross_entropy_over_a_vocabulary():
    """Log-softmax over 50257 logits a row, forward and backward, each a cooperative kernel."""
    logits = torch.randn(2048, 50257, device="cuda", requires_grad=True)
    target = torch.randint(0, 50257, (2048,), device="cuda")
    torch._dynamo.reset()
    with no_fallback():
        loss = torch.compile(F.cross_entropy, backend="mind")(logits, target)
        loss.backward()
    want = logits.detach().double().requires_grad_()
    want_loss = F.cross_entropy(want, target)
    want_loss.backward()
    close((loss, logits.grad), (want_loss, want.grad), 1e-5)


def test_cooperative_kernels_replay():
    """A cooperative softmax recorded and replayed (reduce-overhead): the capture's stream gets
    its own workspace and semaphores, made in the recording's memory pool."""
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    x = torch.randn(1024, 65536, device="cuda")
    want = fn(x.double())
    torch._dynamo.reset()
    with no_fallback():
        step = torch.compile(fn, backend="mind", mode="reduce-overhead")
        for _ in range(3):
            close(step(x).clone(), want, 1e-6)
