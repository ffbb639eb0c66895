"""A compiled optimizer step: AdamW over a model's parameters, eager and compiled.

    python3 -m benchmarks.optimizer [--params gpt2|small] [--device cuda|cpu]
        [--backends eager-foreach,eager-fused,inductor,mind,...] [--json F] [--md F]

`gpt2`: the 148 tensors of GPT-2 small (124M values); `small`: three tensors, for a CPU check.
Gradients are fixed random tensors; each row starts from the same parameters and state. A row:
ms per step (`measure.median_ms`: CUDA events, L2 flushed, on CUDA; wall time on CPU), kernels
one step launches (CUDA), the first call's seconds (compile included, caches fresh), and the
largest difference of the parameters from eager foreach's after that first step.

Eager foreach runs each `_foreach_*` op over every tensor in turn; eager fused is torch's fused
AdamW kernel. Inductor fuses each tensor's update and groups tensors into few kernels; so does
mind (passes/aten_rules/foreach.py splits the foreach ops into each tensor's, fuse fuses each
tensor's update, and combo-kernels groups the updates into combo kernels).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/optimizer.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.common import catch_fallbacks, describe, fresh_caches, names_arg, write_rows
from benchmarks.measure import kernel_count, median_ms

#: a GPT-2 block's parameters: a LayerNorm and attention's two Linears, a LayerNorm and the MLP's
ATTENTION = [(768,), (768,), (2304, 768), (2304,), (768, 768), (768,)]
MLP = [(768,), (768,), (3072, 768), (3072,), (768, 3072), (768,)]
#: GPT-2 small's: the embeddings, 12 blocks, the final LayerNorm
GPT2 = [(50257, 768), (1024, 768), *(ATTENTION + MLP) * 12, (768,), (768,)]
PARAMS = {"gpt2": GPT2, "small": [(16, 8), (8,), (4, 16)]}
#: row name -> (AdamW's keyword arguments, torch.compile's, or None for eager)
BACKENDS: dict[str, tuple[dict, dict | None]] = {
    "eager-foreach": ({"foreach": True}, None),
    "eager-fused": ({"fused": True}, None),
    "inductor": ({"foreach": True}, {"backend": "inductor"}),
    "inductor-reduce-overhead": (
        {"foreach": True},
        {"backend": "inductor", "mode": "reduce-overhead"},
    ),
    "mind": ({"foreach": True}, {"backend": "mind"}),
    "mind-reduce-overhead": ({"foreach": True}, {"backend": "mind", "mode": "reduce-overhead"}),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.optimizer", description=__doc__.splitlines()[0]
    )
    p.add_argument("--params", choices=sorted(PARAMS), default="gpt2")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backends", type=names_arg(list(BACKENDS)), default=list(BACKENDS))
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    return p.parse_args(argv)


def parameters(shapes: list[tuple[int, ...]], device: str) -> list[torch.nn.Parameter]:
    """The same parameters and gradients at every call."""
    gen = torch.Generator().manual_seed(0)
    params = []
    for shape in shapes:
        p = torch.nn.Parameter((torch.randn(shape, generator=gen) * 0.02).to(device))
        p.grad = (torch.randn(shape, generator=gen) * 1e-3).to(device)
        params.append(p)
    return params


def step_of(name: str, params: list[torch.nn.Parameter]) -> Callable[[], object]:
    """The row's step (a torch without fused AdamW on the device raises: the row says so)."""
    adamw, compile_kwargs = BACKENDS[name]
    optimizer = torch.optim.AdamW(params, lr=1e-4, **adamw)
    if compile_kwargs is None:
        return optimizer.step
    return torch.compile(optimizer.step, **compile_kwargs)


def row(name: str, args: argparse.Namespace, reference: list[torch.Tensor]) -> dict:
    """One backend's numbers (its first step checked against eager foreach's `reference`)."""
    out: dict = {"backend": name, "params": args.params, "device": args.device, "fallbacks": []}
    params = parameters(PARAMS[args.params], args.device)
    try:
        step = step_of(name, params)
        with catch_fallbacks(out["fallbacks"]):
            start = time.perf_counter()
            step()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            out["first_call_s"] = time.perf_counter() - start
            out["max_diff"] = max((p - r).abs().max().item() for p, r in zip(params, reference))
            out["ms"] = median_ms(step, args.device)
            out["kernels"] = kernel_count(step, args.device)
    except Exception as e:  # a row that fails says why; the others still run
        out["error"] = describe(e)
    return out


def eager_reference(args: argparse.Namespace) -> list[torch.Tensor]:
    """The parameters after one eager foreach step."""
    params = parameters(PARAMS[args.params], args.device)
    step_of("eager-foreach", params)()
    return [p.detach().clone() for p in params]


def markdown(rows: list[dict]) -> str:
    """The rows as a table; a row's error or fallbacks in its note."""
    lines = [
        "| backend | ms per step | kernels | first call s | max diff from eager | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        cells = [_fmt(r.get(k)) for k in ("ms", "kernels", "first_call_s", "max_diff")]
        note = r.get("error") or "; ".join(r["fallbacks"])
        lines.append(f"| {r['backend']} | {' | '.join(cells)} | {note} |")
    return "\n".join(lines) + "\n"


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fresh_caches()
    reference = eager_reference(args)
    rows = []
    for name in args.backends:
        rows.append(row(name, args, reference))
        torch._dynamo.reset()
    table = markdown(rows)
    print(table)
    write_rows(args.json, args, rows)
    if args.md:
        Path(args.md).write_text(
            f"# AdamW step, {args.params} parameters, {args.device}\n\n{table}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
