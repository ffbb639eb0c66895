"""Where a first call's time goes: a transformer stack compiled in a fresh process, with mind's
compile steps and each pass timed (`benchmarks.compile_time` runs it, one process per row).

A phase is a function wrapped in a timer; its time is its own (exclusive): a phase called from
inside another is taken out of the outer one. What no phase covers is Dynamo (tracing, guards)
and, in a training step, AOTAutograd's backward bookkeeping. Garbage collection is timed for
every backend (Inductor's first call has no other phase).

    python3 -m benchmarks.compile_phases '{"backend": "mind", "mode": "infer", "layers": 4, ...}'

prints one JSON line: the seconds of imports, of a throwaway model's first call (one-off start-up)
and of the transformer's first call, with their phases.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

#: (module, attribute, phase): what `Phases.install` times; `Class.method` patches a method
MIND_PHASES = (
    ("mind.dialects.fx", "import_graph", "fx import"),
    ("torch._functorch.aot_autograd", "aot_module_simplified", "aot_autograd"),
    ("mind.dialects.aten", "import_graph", "aten import"),
    ("mind.backend", "_anonymous", "cache key"),
    ("mind.runtime", "graph_key", "cache key"),
    ("mind.runtime", "cached_graph", "cache lookup"),
    ("mind.runtime", "cached_module", "cache lookup"),
    ("mind.runtime", "remember_graph", "cache store"),
    ("mind.passes.manager", "PassManager.run", "pass manager"),
    ("mind.passes.manager", "verify", "verify"),
    ("mind.dump", "GraphDump.stage", "dump"),
    ("mind.target.triton", "emit", "emit"),
    ("mind.runtime", "load", "load"),
    ("mind.runtime.loader", "bind_kernels", "load"),
    ("mind.compiled", "FirstCallCheck.__call__", "run"),
)
#: phases that are not compiling: the compiled code running (on CPU, in Triton's interpreter)
NOT_COMPILE = ("run",)


#: the clocks every phase is timed on: CPU time of this process (which other work on a shared
#: machine does not inflate) and wall time
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


class Phases:
    """Exclusive seconds per phase (each pass is one, `pass:<name>`) on each clock: a phase
    called inside another is taken out of the outer one. Python's garbage collection is a phase
    of its own (`gc`), taken out of the compile phase it interrupts: a full collection scans
    every object of the process (torch's too), and whichever phase happens to trigger one
    would otherwise look slow."""

    def __init__(self) -> None:
        self.seconds = {clock: defaultdict(float) for clock in CLOCKS}
        self._stack: list[tuple[str, dict[str, float]]] = []
        self._gc_start: dict[str, float] = {}

    def install(self, backend: str) -> None:
        """Time garbage collection; for mind, each phase and pass too."""
        gc.callbacks.append(self._collected)
        if backend != "mind":
            return
        for module, attr, phase in MIND_PHASES:
            owner: Any = importlib.import_module(module)
            *path, name = attr.split(".")
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, name, self.timed(getattr(owner, name), phase))
        from mind.passes import PASSES

        for cls in PASSES.values():
            cls.run = self.timed(cls.run, f"pass:{cls.name}")

    def _collected(self, phase: str, info: dict) -> None:
        """A `gc.callbacks` hook: the collection's seconds go to `gc`, unless the code it
        interrupted is not compiling (the compiled code's own run keeps its collections)."""
        now = {clock: tick() for clock, tick in CLOCKS.items()}
        if phase == "start":
            self._gc_start = now
            return
        if not self._gc_start or (self._stack and self._stack[-1][0] in NOT_COMPILE):
            return
        for clock, end in now.items():
            spent = end - self._gc_start[clock]
            self.seconds[clock]["gc"] += spent
            if self._stack:
                self._stack[-1][1][clock] += spent

    def timed(self, fn: Callable, phase: str) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            start = {clock: now() for clock, now in CLOCKS.items()}
            self._stack.append((phase, dict.fromkeys(CLOCKS, 0.0)))
            try:
                return fn(*args, **kwargs)
            finally:
                _, inner = self._stack.pop()
                for clock, now in CLOCKS.items():
                    total = now() - start[clock]
                    self.seconds[clock][phase] += total - inner[clock]
                    if self._stack:
                        self._stack[-1][1][clock] += total

        return wrapper

    def take(self) -> dict[str, dict[str, float]]:
        """Seconds per phase on each clock since the last call."""
        out = {clock: dict(seconds) for clock, seconds in self.seconds.items()}
        self.seconds = {clock: defaultdict(float) for clock in CLOCKS}
        return out


def transformer(layers: int, width: int, heads: int, attention: str):
    """A pre-norm transformer stack in plain torch: LayerNorm, Linear, attention (explicit softmax
    with a causal mask, or SDPA), GELU. Nothing downloads."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (
                z.view(b, t, heads, c // heads).transpose(1, 2)
                for z in self.qkv(self.ln1(x)).split(c, dim=-1)
            )
            if attention == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
                y = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Stack(nn.Module):
        """The layers in turn (not nn.Sequential, whose forward the throwaway may share: Dynamo
        would compile a second input shape of one frame with symbolic sizes)."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return Stack()


def first_call(spec: dict, model, x, phases: Phases) -> dict[str, Any]:
    """Compile `model` and time its first call on `x` (for `train`, the forward and the backward
    apart: wall and CPU seconds, and the phases)."""
    import torch

    train = spec["mode"] == "train"
    model = model.to(spec["device"]).train(train)
    backend = {} if spec["backend"] == "inductor" else {"backend": spec["backend"]}
    compiled = torch.compile(model, **backend)
    steps: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        sync()
        phases.take()  # (what ran since, building the model, is not this step's)
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        sync()
        steps[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
        steps[name]["phases"] = phases.take()
        return out

    def sync() -> None:
        if spec["device"] == "cuda":
            torch.cuda.synchronize()

    with torch.set_grad_enabled(train):
        out = step("forward", lambda: compiled(x))
    if train:
        step("backward", lambda: out.float().pow(2).mean().backward())
    return steps


def throwaway(spec: dict) -> tuple[Any, Any]:
    """A Linear and a GELU: compiled first, so that one-off start-up (Dynamo's, the backend's)
    is not counted in the model's first call."""
    import torch
    from torch import nn

    class Throwaway(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(spec["width"], spec["width"])

        def forward(self, x):
            return nn.functional.gelu(self.linear(x))

    return Throwaway(), torch.randn(spec["batch"], spec["width"], device=spec["device"])


def model_and_input(spec: dict) -> tuple[Any, Any]:
    """The spec's model (`model`: one of `benchmarks.zoo`'s, in `dtype`) or a transformer stack
    (`layers`), and its input."""
    import torch

    if "model" in spec:
        return zoo_model(spec)
    torch.manual_seed(0)
    model = transformer(spec["layers"], spec["width"], spec["heads"], spec["attention"])
    x = torch.randn(spec["batch"], spec["seq"], spec["width"], device=spec["device"])
    return model, x


def zoo_model(spec: dict) -> tuple[Any, Any]:
    """One of the models benchmark's models (returning the tensor its output leads with) and its
    input, run once eagerly first, as that benchmark runs it before it compiles: a library's
    model imports and sets up what it defers to its first call, which is no compiler's time."""
    import torch
    from torch import nn

    from benchmarks.model_row import DTYPES, primary
    from benchmarks.zoo import MODELS, make

    module, (x,) = make(MODELS[spec["model"]], spec["small"], spec["device"], DTYPES[spec["dtype"]])

    class Primary(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = module

        def forward(self, x):
            return primary(self.module(x))

    model = Primary().train(spec["mode"] == "train")
    with torch.set_grad_enabled(spec["mode"] == "train"):
        out = model(x)
        if spec["mode"] == "train":
            out.float().pow(2).mean().backward()
            model.zero_grad(set_to_none=True)
    return model, x


def startup_s(spec: dict) -> dict[str, float]:
    """Seconds to import torch, and the backend's own modules (what a first call imports)."""
    start = time.perf_counter()
    import torch  # noqa: F401

    torch_s = time.perf_counter() - start
    start = time.perf_counter()
    if spec["backend"] == "mind":
        import mind.backend  # noqa: F401
    else:
        import torch._inductor.compile_fx  # noqa: F401
    return {"import torch": torch_s, "import backend": time.perf_counter() - start}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    imports = startup_s(spec)
    phases = Phases()
    phases.install(spec["backend"])
    row = {
        "spec": spec,
        "startup": imports,
        "throwaway": first_call(spec, *throwaway(spec), phases),
        "steps": first_call(spec, *model_and_input(spec), phases),
    }
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
