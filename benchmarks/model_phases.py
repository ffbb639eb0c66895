"""Where mind's first call goes on the models of `benchmarks.models`: each row (model, mode) in a
fresh process with empty caches, a throwaway first call for start-up, then the model's first call
(inference, or one training step), with mind's phases and passes timed (`compile_phases.Phases`).

    python3 -m benchmarks.model_phases [--models vit,llama] [--modes infer,train] [--small]
        [--batch N] [--device cpu|cuda] [--dtype fp32|bf16] [--no-run] [--profile DIR] [--json F]

On CPU the kernels run in Triton's interpreter, slowly at full size: `--no-run` binds every
interpreted kernel to a launcher that does nothing, so a step runs only its ATen calls (matmuls,
convolutions) and what is timed is the compile. The outputs are then garbage; the compile is
the same. On `--device cuda` the `load` phase holds the wait for Triton's compile workers.
`--profile DIR` writes each row's cProfile stats (`<model>-<mode>-<dtype>.prof`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import CACHE_DIRS, names_arg
from benchmarks.compile_phases import CLOCKS, NOT_COMPILE, Phases

ROOT = Path(__file__).resolve().parent.parent
MODES = ("infer", "train")
#: what no phase covers: Dynamo's tracing and guards, AOTAutograd's bookkeeping
OTHER = "other (dynamo, aot bookkeeping)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.zoo import DEFAULT_MODELS

    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.model_phases", description=__doc__.splitlines()[0]
    )
    p.add_argument("--models", type=lambda s: s.split(","), default=list(DEFAULT_MODELS))
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument("--small", action="store_true", help="the tiny CPU configs")
    p.add_argument("--batch", type=int, default=None, help="override the config's batch")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--no-run", action="store_true", help="interpreted kernels do nothing")
    p.add_argument("--profile", default=None, help="folder for cProfile stats per row")
    p.add_argument("--json", default=None)
    p.add_argument("--row", default=None, help=argparse.SUPPRESS)  # one row, in this process
    return p.parse_args(argv)


def skip_interpreted_kernels() -> None:
    """Interpreted kernels bind to a launcher that does nothing (`--no-run`)."""
    from mind.runtime import launch

    real = launch.Binding.launcher

    def launcher(self):
        return (lambda *args: None) if self.interpreted else real(self)

    launch.Binding.launcher = launcher


def run_row(spec: dict) -> dict:
    """The row in this process: a throwaway Linear's first call, then the model's, timed."""
    import torch

    from benchmarks.model_row import DTYPES, Task, compiled, stepper
    from benchmarks.zoo import MODELS, make

    phases = Phases()
    phases.install("mind")
    if spec["no_run"]:
        skip_interpreted_kernels()
    device, dtype = spec["device"], DTYPES[spec["dtype"]]
    task = Task(spec["model"], spec["dtype"], spec["mode"], "mind", device, spec["small"])
    module = torch.nn.Linear(8, 8).to(device, dtype).train(task.mode == "train")
    stepper(
        task, module, compiled(module, "mind"), (torch.ones(4, 8, device=device, dtype=dtype),)
    )()
    torch._dynamo.reset()
    model = MODELS[spec["model"]]
    if spec["batch"] is not None:
        model = model.__class__(**{**vars(model), "full": {**model.full, "batch": spec["batch"]}})
    module, inputs = make(model, task.small, device, dtype)
    module.train(task.mode == "train")
    step = stepper(task, module, compiled(module, "mind"), inputs)
    phases.take()  # the throwaway's and the model's building
    profile = cProfile.Profile() if spec["profile"] else None
    start = {clock: tick() for clock, tick in CLOCKS.items()}
    if profile:
        profile.enable()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
    if profile:
        profile.disable()
        profile.dump_stats(
            os.path.join(spec["profile"], f"{spec['model']}-{spec['mode']}-{spec['dtype']}.prof")
        )
    row: dict = {"spec": spec}
    for clock, seconds in phases.take().items():
        total = CLOCKS[clock]() - start[clock]
        run = sum(seconds.pop(p, 0.0) for p in NOT_COMPILE)
        seconds[OTHER] = total - run - sum(seconds.values())
        row[clock] = {"compile_s": total - run, "run_s": run, "phases": seconds}
    return row


def in_fresh_process(spec: dict) -> dict:
    caches = tempfile.mkdtemp(prefix="mind-phases-")
    env = dict(os.environ, **{var: os.path.join(caches, sub) for var, sub in CACHE_DIRS.items()})
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.model_phases", "--row", json.dumps(spec)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"spec": spec, "error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict], clock: str = "cpu") -> str:
    """Seconds per phase (rows) and model (columns) on `clock`, and the compile's total."""
    done = [r for r in rows if "error" not in r]
    names = {n for r in done for n in r[clock]["phases"]}
    head = [f"{r['spec']['model']} {r['spec']['mode']}" for r in done]
    out = [f"| phase ({clock} s) | " + " | ".join(head), "|---|" + "---:|" * len(head)]
    for name in sorted(names, key=lambda n: (n.startswith("pass:"), n)):
        cells = (r[clock]["phases"].get(name, 0.0) for r in done)
        out.append(f"| {name} | " + " | ".join(f"{c:.2f}" for c in cells))
    out.append("| **compile** | " + " | ".join(f"**{r[clock]['compile_s']:.2f}**" for r in done))
    out = [line if line.endswith("|") else line + " |" for line in out]
    for r in rows:
        if "error" in r:
            out += ["", f"error in {r['spec']}:", "```", r["error"][-1500:], "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.row:
        print(json.dumps(run_row(json.loads(args.row))))
        return 0
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    rows = []
    for model in args.models:
        for mode in args.modes:
            spec = dict(
                model=model, mode=mode, small=args.small, batch=args.batch, device=args.device,
                dtype=args.dtype, no_run=args.no_run,
                profile=args.profile and os.path.abspath(args.profile),
            )  # fmt: skip
            print(f"{model} {mode}...", file=sys.stderr)
            rows.append(in_fresh_process(spec))
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    sys.stdout.write(markdown(rows) + "\n" + markdown(rows, "wall"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
