"""One row of the model benchmark: one model, dtype, mode (inference or one training step) and
backend, built, checked (against eager, and against an fp64 reference: `against_reference`) and
timed.

A row runs in two phases. The first (compile: build, fp64 reference, eager step, compile, first
call, warm-up, check) may overlap other rows' first phases; the second (timing and profiling) runs
alone. `lock` provides that: `lock.shared()` around the first, `lock.exclusive()` around the
second (see `workers.TimingLock`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn

from benchmarks.common import catch_fallbacks, describe
from benchmarks.measure import kernel_stats, max_error, memory_mib, rms, rms_error, sync, wall_ms
from benchmarks.zoo import MODELS, make

# A step's output ("output") and its parameters' gradients ("grad <name>"), copied (`snapshot`).
Snapshot = dict[str, torch.Tensor]
# What a row reports of a check (`check`): errors, ratios, tensor names.
Report = dict[str, object]

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
# The check (`against_reference`) measures a compiled row's and eager's errors against the same
# model, weights and inputs run once in this dtype, on the row's device: fp64 has 29 more bits
# than fp32 and 45 more than bf16, so its own error does not count against either. fp64 on CUDA
# too: an fp32 reference of an fp32 row would be eager itself, and cuDNN runs fp32 convolutions
# in TF32 by default (torch.backends.cudnn.allow_tf32), which keeps 10 bits of their inputs'
# mantissas (bf16 keeps 7); an H200 runs fp64 matmuls on its tensor cores: one step costs little.
REFERENCE_DTYPE = torch.float64
# A tensor passes when its RMS error against the reference is at most MULTIPLIER times eager's
# error plus a floor. Inductor's checker (torch._dynamo.utils.same) takes 2 for fp32, and 3 for
# bf16 and for tensors of under 1000 elements; here 3 for all: on the --small CPU configs the
# compiled fp32 ResNet's gradients reach 1.9 times eager's error, Inductor's and mind's alike.
# A gradient off by 2x has an error as large as the gradient: 1 / (eager's relative error on it)
# times eager's, about 5 on the small ResNet's deepest batch norms in bf16 (20% off in eager),
# hundreds elsewhere in bf16, millions in fp32.
MULTIPLIER = 3.0
# The floor: FLOOR times the dtype's epsilon times the tensor's own reference RMS, or times
# FLOOR_SHARE of the largest reference RMS among the tensors of its kind (output, gradients) if
# that is larger. A quarter of epsilon is about the RMS error of rounding the exact result to the
# dtype once, so the floor counts only where eager is (nearly) exact: it lets a compiled tensor
# then be off by a few roundings. The share does the same for a gradient that is zero in exact
# arithmetic (a key projection's bias under softmax): it holds rounding noise only, of the size
# of its neighbours' rounding, not of its own.
FLOOR = 0.25
FLOOR_SHARE = 1e-3
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


def snapshot(module: nn.Module, step: Callable[[], torch.Tensor]) -> Snapshot:
    """Copies of one step's output and gradients (CUDA-graph outputs are overwritten later)."""
    taken = {"output": step().detach().clone()}
    for name, p in module.named_parameters():
        if p.grad is not None:
            taken[f"grad {name}"] = p.grad.detach().clone()
    return taken


def errors(got: Snapshot, want: Snapshot) -> Report:
    """The largest error against eager of the output, and of all gradients together, absolute and
    relative to the largest eager value of the output, or of all gradients. One scale for all
    gradients: a gradient that is zero in exact arithmetic (a key bias's, under softmax) holds
    rounding noise, and its error relative to its own size is noise over noise. Reported, not
    judged: `against_reference` judges."""
    if got.keys() != want.keys():
        missing = sorted(want.keys() ^ got.keys())
        raise AssertionError(f"gradients differ from eager's in which exist: {missing[:5]}")
    out: Report = {}
    err, scale = max_error(got["output"], want["output"])
    out["out_abs"], out["out_rel"] = err, _ratio(err, scale)
    grads = {k.removeprefix("grad "): max_error(got[k], want[k]) for k in want if k != "output"}
    if grads:
        worst = max(grads, key=lambda k: _order(grads[k][0]))
        err, scale = grads[worst][0], max(s for _, s in grads.values())
        out["grad_abs"], out["grad_rel"], out["worst_grad"] = err, _ratio(err, scale), worst
    return out


def reference(task: Task, module: nn.Module, inputs: tuple) -> Snapshot:
    """The snapshot of one step of a `REFERENCE_DTYPE` copy of `module` on copies of `inputs`:
    the same weights and inputs (the row's dtype's values, exactly), computed more precisely."""
    wide = copy.deepcopy(module).to(REFERENCE_DTYPE)
    args = tuple(t.to(REFERENCE_DTYPE) if t.is_floating_point() else t for t in inputs)
    return snapshot(wide, stepper(task, wide, wide, args))


# The kinds of tensor a step yields: its output, and the parameters' gradients.
KINDS = ("out", "grad")


def by_kind(taken: Snapshot) -> dict[str, list[str]]:
    """A snapshot's tensors by kind (no gradients in inference)."""
    grads = [k for k in taken if k != "output"]
    return {"out": ["output"], "grad": grads} if grads else {"out": ["output"]}


def against_reference(
    got: Snapshot, eager: Snapshot, truth: Snapshot, dtype: torch.dtype
) -> Report:
    """The check, per tensor: `ratio` = compiled's RMS error against the reference `truth` over
    (eager's + a floor, see FLOOR); it passes at MULTIPLIER or less. Per kind (out, grad),
    the tensor with the largest ratio: the ratio, its name, both errors and the floor."""
    eps = torch.finfo(dtype).eps
    out: Report = {}
    for kind, names in by_kind(truth).items():
        size = {n: rms(truth[n]) for n in names}
        largest = max(size.values())
        parts = {}
        for n in names:
            floor = FLOOR * eps * max(size[n], FLOOR_SHARE * largest)
            err, eager_err = rms_error(got[n], truth[n]), rms_error(eager[n], truth[n])
            parts[n] = (_against_eager(err, eager_err, floor), err, eager_err, floor)
        worst = max(parts, key=lambda n: _order(parts[n][0]))
        fields = ("ratio", "rmse", "eager_rmse", "floor")
        out.update({f"{kind}_{f}": v for f, v in zip(fields, parts[worst])})
        out[f"{kind}_ratio_of"] = worst
    return out


def _against_eager(err: float, eager_err: float, floor: float) -> float:
    """err / (eager_err + floor): nan where compiled has a nan; 0 where compiled is exact, or
    where eager has a nan that compiled has not (eager's error is unbounded, compiled's not)."""
    if err != err or err == 0:
        return err
    if eager_err != eager_err:
        return 0.0
    return err / (eager_err + floor) if eager_err + floor else float("inf")


def check(got: Snapshot, eager: Snapshot, truth: Snapshot, dtype: torch.dtype) -> Report:
    """Everything a row reports of one compiled step: its errors against eager, and the check."""
    return {**errors(got, eager), **against_reference(got, eager, truth, dtype)}


# What `check` reports, in groups: each group's first field says which of two checks of a row
# is the worse (the larger), the rest go with it.
CHECK_GROUPS = (
    ("out_rel", "out_abs"),
    ("grad_rel", "grad_abs", "worst_grad"),
    *((f"{k}_ratio", f"{k}_ratio_of", f"{k}_rmse", f"{k}_eager_rmse", f"{k}_floor")
      for k in KINDS),
)  # fmt: skip


def _ratio(err: float, scale: float) -> float:
    if err != err or err == 0:
        return err
    return err / scale if scale else float("inf")


def _order(err: float) -> float:
    return float("inf") if err != err else err  # nan is the worst


def worse(a: Report, b: Report) -> Report:
    """Of two checks of the same row, group by group the worse."""
    merged = dict(a)
    for lead, *rest in CHECK_GROUPS:
        if lead in b and _order(b[lead]) > _order(a.get(lead, -1.0)):
            merged.update({f: b[f] for f in (lead, *rest)})
    return merged


def verdict(errs: Report) -> tuple[bool, str]:
    """(ok, why not): ok when every tensor's ratio is at most MULTIPLIER."""
    bad = [
        f"{errs[f'{kind}_ratio_of']}: RMS error against fp64"
        f" {errs[f'{kind}_rmse']:.2e}, eager's {errs[f'{kind}_eager_rmse']:.2e} + floor"
        f" {errs[f'{kind}_floor']:.1e}: ratio {errs[f'{kind}_ratio']:.3g}, over {MULTIPLIER:g}"
        for kind in KINDS
        if f"{kind}_ratio" in errs and not errs[f"{kind}_ratio"] <= MULTIPLIER
    ]
    return not bad, "; ".join(bad)


def compiled_since(before: dict[str, int]) -> dict[str, int]:
    """Kernels mind compiled since `before` (a copy of `counters["mind_compile"]`), in the
    loading process (`here`) and by its compile workers (runtime/compile_pool.py), and kernels
    it bound from launch records instead (`recorded`, runtime/static_launch.py)."""
    now = torch._dynamo.utils.counters["mind_compile"]
    return {k: int(now[k] - before.get(k, 0)) for k in ("here", "workers", "recorded")}


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
    checked = BACKENDS[task.backend] is not None
    with lock.shared():
        module, inputs = make(MODELS[task.model], task.small, task.device, dtype)
        module.train(task.mode == "train")
        if checked:
            start = time.perf_counter()
            truth = reference(task, module, inputs)
            sync(task.device)
            row["reference_s"] = time.perf_counter() - start
        want = snapshot(module, stepper(task, module, module, inputs))
        torch._dynamo.reset()
        with catch_fallbacks(fallbacks):
            compiles = dict(torch._dynamo.utils.counters["mind_compile"])
            start = time.perf_counter()
            fn = compiled(module, task.backend)
            step = stepper(task, module, fn, inputs)
            got = snapshot(module, step)
            sync(task.device)
            if checked:
                row["first_s"] = time.perf_counter() - start
                row["first_compiles"] = compiled_since(compiles)
            for _ in range(WARM_UP_CALLS[device_kind(task.device)]):
                step()
            again = snapshot(module, step)
        row["fallback"] = fallbacks
        row.update(dynamo_counts())
        if checked:
            errs = worse(check(got, want, truth, dtype), check(again, want, truth, dtype))
            row.update(errs)
            row["ok"], row["why"] = verdict(errs)
            del truth
        del got, again, want
    with lock.exclusive():
        row["wall_ms"] = wall_ms(step, task.device, **TIMING[device_kind(task.device)])
        stats = kernel_stats(step, task.device)
        if stats is not None:
            row["kernels"], row["gpu_ms"] = stats
            row["host_ms"] = row["wall_ms"] - row["gpu_ms"]
        memory = memory_mib(step, task.device)
        if memory is not None:
            row["peak_mib"], row["reserved_mib"] = memory
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
