"""What `torch.compile(fn, backend="mind", mode=..., options={...})` accepts.

A mode is a preset of options, as for Inductor; `options` sets them one by one on top of the
mode. Anything else is an error that names what is valid, raised when Dynamo first calls the
backend (torch.compile itself does not look at a custom backend's arguments).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

#: the passes from aten IR to triton IR
PIPELINE = (
    "channels-last,lower,mm-templates,realize,inline,mm-epilogues,schedule,fuse,cse,merge-loops,"
    "online-softmax,welford,split-reductions,reorder-collectives,combo-kernels,to-triton"
)


def default_pipeline() -> str:
    """`MIND_PIPELINE` replaces the passes (to try options, or leave a pass out) without code."""
    return os.environ.get("MIND_PIPELINE", PIPELINE)


@dataclass(frozen=True)
class Options:
    #: record each compiled graph's launches once per input shape and replay them (CUDA graphs)
    cudagraphs: bool = False
    #: input shapes recorded per graph; a graph called with more shapes runs them unrecorded
    cudagraph_max_shapes: int = 8
    #: recordings per shape: another is made while a caller holds outputs of all earlier ones
    cudagraph_max_recordings: int = 2
    #: the pass pipeline from aten IR to triton IR (default: `MIND_PIPELINE`, or PIPELINE)
    pipeline: str = field(default_factory=default_pipeline)
    #: benchmark each kernel's candidate configs (and persistent against looped reductions) at
    #: load, and Triton matmul templates against ATen, on the GPU; winners cached on disk
    autotune: bool = False
    #: Inductor's layout optimization: convolutions take and give channels-last tensors where
    #: its rule says so (the pass `channels-last`; False leaves it out of the pipeline)
    layout_optimization: bool = True
    #: round every bf16/f16 op's result as eager does, also inside a fused kernel (Inductor's
    #: option of that name; by default a fused chain computes in f32 and rounds where it stores)
    emulate_precision_casts: bool = False
    #: evaluate attention masks that no input changes before tracing: drop an all-true one,
    #: pass the causal triangle as is_causal (the pass `attention-masks`), so SDPA can choose
    #: flash attention as eager code that skips such masks does
    attention_masks: bool = True
    #: split long rows read in several phases (a softmax over 65536 columns) between programs
    #: that wait for each other at barriers (`to-triton{cooperative}`); False for a program that
    #: runs one compiled graph on several streams at once
    cooperative_reductions: bool = True


_TYPES = {"bool": bool, "int": int, "str": str}

#: torch.compile's modes as options, as Inductor's: max-autotune tunes and records CUDA graphs
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True, "autotune": True},
    "max-autotune-no-cudagraphs": {"autotune": True},
}


def resolve_options(mode: str | None = None, options: dict[str, Any] | None = None) -> Options:
    """The options for a mode (None is "default") and a dict of overrides."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"mind: unknown mode {mode!r} (modes: {', '.join(MODES)})")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"mind: options must be a dict, not {type(options).__name__}")
    fields = {f.name: _TYPES[f.type] for f in dataclasses.fields(Options)}
    values = dict(MODES[mode or "default"])
    for key, value in (options or {}).items():
        if key not in fields:
            raise ValueError(f"mind: unknown option {key!r} (options: {', '.join(fields)})")
        if type(value) is not fields[key]:
            raise TypeError(
                f"mind: option {key!r} takes a {fields[key].__name__}, "
                f"not {type(value).__name__} ({value!r})"
            )
        values[key] = value
    chosen = Options(**values)
    if chosen.pipeline != PIPELINE:  # (the default is checked by the tests, not at each start)
        check_pipeline(
            chosen.pipeline, "options['pipeline']" if "pipeline" in values else "MIND_PIPELINE"
        )
    return chosen


def check_pipeline(pipeline: str, source: str) -> None:
    """Raise ValueError unless `pipeline` parses and brings aten IR to triton IR: a typo must
    not make every graph fall back to eager."""
    from mind.ir.diagnostics import MindError
    from mind.passes import parse_pipeline, resolve_pipeline

    try:
        passes = resolve_pipeline(parse_pipeline(pipeline, source), "aten")
    except MindError as exc:
        raise ValueError(f"mind: {exc.render()}") from None
    end = passes[-1].output if passes else "aten"
    if end != "triton":
        raise ValueError(
            f"mind: {source}: the pipeline must end at triton IR, not {end} IR: {pipeline!r}"
        )


def pipeline_of(options: Options, deterministic: bool = False) -> str:
    """The pipeline the options run: `pipeline`, where `autotune` turns on to-triton's candidates
    and has mm-templates benchmark templates against ATen (unless it selects otherwise),
    `deterministic` (torch.use_deterministic_algorithms) has lower keep scatters in ATen,
    `layout_optimization=False` leaves channels-last out, `emulate_precision_casts` has inline
    and fuse keep each op's rounding, and `cooperative_reductions=False` keeps to-triton's long rows
    looped."""
    if (
        not options.autotune
        and not deterministic
        and options.layout_optimization
        and not options.emulate_precision_casts
        and options.cooperative_reductions
    ):
        return options.pipeline
    from mind.passes import parse_pipeline

    passes = []
    for p in parse_pipeline(options.pipeline):
        if not options.layout_optimization and p.name == "channels-last":
            continue
        if options.autotune and p.name == "to-triton":
            p = dataclasses.replace(p, autotune=True)
        elif options.autotune and p.name == "mm-templates" and p.select == "aten":
            p = dataclasses.replace(p, select="autotune")
        elif deterministic and p.name == "lower":
            p = dataclasses.replace(p, deterministic=True)
        elif options.emulate_precision_casts and p.name in ("inline", "fuse"):
            p = dataclasses.replace(p, emulate_precision_casts=True)
        if not options.cooperative_reductions and p.name == "to-triton":
            p = dataclasses.replace(p, cooperative=False)
        passes.append(p)
    return ",".join(str(p) for p in passes)
