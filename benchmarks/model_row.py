"""One row of the model benchmark: one model, dtype, mode (inference or one training step) and
backend, built, checked against eager and timed.

A row runs in two phases. The first (compile: build, eager reference, compile, first call,
warm-up, check) may overlap other rows' first phases; the second (timing and profiling) runs
alone. `lock` provides that: `lock.shared()` around the first, `lock.exclusive()` around the
second (see `workers.TimingLock`).
"""

from __future__ import annotations

import contextlib
import functools
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn

from benchmarks.common import catch_fallbacks, describe
from benchmarks.measure import kernel_stats, max_error, sync, wall_ms
from benchmarks.zoo import MODELS, make

# name -> (torch.compile backend, mode); None is eager. The max-autotune pair (-ma) runs when
# asked for (--backends ...,inductor-ma,mind-ma): its compiles take minutes.
BACKENDS: dict[str, tuple[str, str | None] | None] = {
    "eager": None,
    "inductor": ("inductor", None),
    "inductor-ro": ("inductor", "reduce-overhead"),
    "inductor-ma": ("inductor", "max-autotune"),
    "mind": ("mind", None),
    "mind-ro": ("mind", "reduce-overhead"),
    "mind-ma": ("mind", "max-autotune"),
}
DEFAULT_BACKENDS = [b for b in BACKENDS if not b.endswith("-ma")]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
MODES = ("infer", "train")
# Largest error, relative to the largest eager value (see `errors`), that still passes: a
# different summation order, or intermediates kept in fp32 where eager rounds each op to bf16,
# moves results by a few units in the last place of the model's dtype; a wrong kernel, by more.
TOLERANCE = {"fp32": 1e-3, "bf16": 5e-2}
# Calls after the first before checking again: reduce-overhead records CUDA graphs in these, so
# the second check sees replays. On CPU (no CUDA graphs) one: there mind's kernels run in Triton's
# interpreter, slowly.
WARM_UP_CALLS = {"cuda": 3, "cpu": 1}
# Timing: a median over `min_reps` calls at least, more while `budget_s` lasts.
TIMING = {
    "cuda": dict(budget_s=0.3, min_reps=20, max_reps=1000),
    "cpu": dict(budget_s=0.05, min_reps=2, max_reps=10),
}


@dataclass(frozen=True)
class Task:
    model: str
    dtype: str
    mode: str
    backend: str
    device: str = "cuda"
    small: bool = False


class NoLock:
    """For rows run one after another in one process: nothing to exclude."""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    exclusive = shared


def device_kind(device: str) -> str:
    return device.split(":")[0]


def primary(out: object) -> torch.Tensor:
    """The tensor a model's output leads with (a Hugging Face ModelOutput, a tuple or a tensor)."""
    return out if isinstance(out, torch.Tensor) else out[0]


def compiled(module: nn.Module, backend: str) -> Callable:
    if BACKENDS[backend] is None:
        return module
    name, mode = BACKENDS[backend]
    return torch.compile(module, backend=name, mode=mode)


@functools.cache
def _loss_weights(shape: tuple[int, ...], device: str) -> torch.Tensor:
    """A fixed random tensor of the output's shape: the same in every row and process."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)


def loss(out: torch.Tensor) -> torch.Tensor:
    """mean(out * W), W fixed random weights (`_loss_weights`), in fp32 or wider: every element
    of the output gets a gradient of its own, W / out.numel(). Not mean(out**2): of a model whose
    output is normalized (a LayerNorm or RMSNorm with unit weight, as GPT-2's, BERT's and Llama's
    are at random init) that is constant up to the norm's eps, and the gradients upstream of the
    norm are rounding noise, which no check can tell from a wrong gradient."""
    wide = torch.promote_types(out.dtype, torch.float32)
    return (out.to(wide) * _loss_weights(tuple(out.shape), str(out.device)).to(wide)).mean()


def stepper(task: Task, module: nn.Module, fn: Callable, inputs: tuple) -> Callable[[], object]:
    """One inference call (no grad), or one training step: zeroed (None) gradients, forward, a
    loss on the output (`loss`), backward. Returns the model's output."""
    if task.mode == "infer":

        def infer() -> torch.Tensor:
            with torch.no_grad():
                return primary(fn(*inputs))

        return infer

    def train() -> torch.Tensor:
        module.zero_grad(set_to_none=True)
        out = primary(fn(*inputs))
        loss(out).backward()
        return out

    return train


def snapshot(module: nn.Module, step: Callable[[], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of one step's output and gradients (CUDA-graph outputs are overwritten later)."""
    taken = {"output": step().detach().clone()}
    for name, p in module.named_parameters():
        if p.grad is not None:
            taken[f"grad {name}"] = p.grad.detach().clone()
    return taken


def errors(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict[str, object]:
    """The largest error of the output, and of all gradients together, absolute and relative to
    the largest eager value of the output, or of all gradients. One scale for all gradients: a
    gradient that is zero in exact arithmetic (a key bias's, under softmax) holds rounding noise,
    and its error relative to its own size is noise over noise."""
    if got.keys() != want.keys():
        missing = sorted(want.keys() ^ got.keys())
        raise AssertionError(f"gradients differ from eager's in which exist: {missing[:5]}")
    out: dict[str, object] = {}
    err, scale = max_error(got["output"], want["output"])
    out["out_abs"], out["out_rel"] = err, _ratio(err, scale)
    grads = {k.removeprefix("grad "): max_error(got[k], want[k]) for k in want if k != "output"}
    if grads:
        worst = max(grads, key=lambda k: _order(grads[k][0]))
        err, scale = grads[worst][0], max(s for _, s in grads.values())
        out["grad_abs"], out["grad_rel"], out["worst_grad"] = err, _ratio(err, scale), worst
    return out


# What `errors` reports per kind of tensor.
ERROR_FIELDS = {"out": ("out_abs", "out_rel"), "grad": ("grad_abs", "grad_rel", "worst_grad")}


def _ratio(err: float, scale: float) -> float:
    if err != err or err == 0:
        return err
    return err / scale if scale else float("inf")


def _order(err: float) -> float:
    return float("inf") if err != err else err  # nan is the worst


def worse(a: dict[str, object], b: dict[str, object]) -> dict[str, object]:
    """Of two checks of the same row, per tensor kind the one with the larger relative error."""
    merged = dict(a)
    for kind, fields in ERROR_FIELDS.items():
        rel = f"{kind}_rel"
        if rel in b and _order(b[rel]) > _order(a.get(rel, -1.0)):
            merged.update({f: b[f] for f in fields})
    return merged


def verdict(errs: dict[str, object], dtype: str) -> tuple[bool, str]:
    tol = TOLERANCE[dtype]
    bad = [
        f"{kind} error {errs[f'{kind}_rel']:.3g} of max |eager| over tolerance {tol:g}"
        for kind in ERROR_FIELDS
        if f"{kind}_rel" in errs and not errs[f"{kind}_rel"] <= tol
    ]
    return not bad, "; ".join(bad)


def dynamo_counts() -> dict[str, int]:
    """Graphs Dynamo compiled and graph breaks it took since the last reset."""
    counters = torch._dynamo.utils.counters
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }


def warm_up(task: Task) -> float:
    """Seconds to compile and run a throwaway Linear in the row's backend and mode, so that the
    row's first-call time leaves out one-off start-up (imports, compile workers, profiler)."""
    start = time.perf_counter()
    if task.device.startswith("cuda"):
        x = torch.ones(8, device=task.device)
        kernel_stats(lambda: x + 1, task.device)
    if BACKENDS[task.backend] is not None:
        torch._dynamo.reset()
        module = nn.Linear(8, 8).to(task.device, DTYPES[task.dtype])
        x = torch.ones(4, 8, device=task.device, dtype=DTYPES[task.dtype])
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the row itself reports what its backend says
            stepper(task, module, compiled(module, task.backend), (x,))()
        torch._dynamo.reset()
    sync(task.device)
    return time.perf_counter() - start


def measure(task: Task, lock, row: dict[str, object]) -> None:
    """Fills `row` with the task's measurements; what raises ends the row with what it has.
    `lock` has `shared()` and `exclusive()` (a `workers.TimingLock`, or a `NoLock`)."""
    dtype = DTYPES[task.dtype]
    fallbacks: list[str] = []
    with lock.shared():  # in pieces: a timing waiting for the lock gets in between
        row["startup_s"] = warm_up(task)
    with lock.shared():
        module, inputs = make(MODELS[task.model], task.small, task.device, dtype)
        module.train(task.mode == "train")
        want = snapshot(module, stepper(task, module, module, inputs))
        torch._dynamo.reset()
        with catch_fallbacks(fallbacks):
            start = time.perf_counter()
            fn = compiled(module, task.backend)
            step = stepper(task, module, fn, inputs)
            got = snapshot(module, step)
            sync(task.device)
            if BACKENDS[task.backend] is not None:
                row["first_s"] = time.perf_counter() - start
            for _ in range(WARM_UP_CALLS[device_kind(task.device)]):
                step()
            errs = worse(errors(got, want), errors(snapshot(module, step), want))
        row["fallback"] = fallbacks
        row.update(dynamo_counts())
        if BACKENDS[task.backend] is not None:
            row.update(errs)
            row["ok"], row["why"] = verdict(errs, task.dtype)
        del got, want
    with lock.exclusive():
        row["wall_ms"] = wall_ms(step, task.device, **TIMING[device_kind(task.device)])
        stats = kernel_stats(step, task.device)
        if stats is not None:
            row["kernels"], row["gpu_ms"] = stats
            row["host_ms"] = row["wall_ms"] - row["gpu_ms"]
    if BACKENDS[task.backend] is not None:  # how mind's CUDA graphs served the row's calls
        row["cudagraphs"] = dict(torch._dynamo.utils.counters["mind_cudagraphs"])


def run(task: Task, lock=None) -> dict[str, object]:
    """The task's row: its measurements, or as many as it got and the error that stopped it."""
    row: dict[str, object] = asdict(task)
    start = time.perf_counter()
    try:
        measure(task, lock or NoLock(), row)
    except Exception as e:  # the row's result is the failure; the run goes on
        row["error"] = describe(e)
        row["traceback"] = traceback.format_exc()[-4000:]
    row["row_s"] = time.perf_counter() - start
    return row
