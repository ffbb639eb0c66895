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
PIPELINE = "lower,realize,inline,schedule,fuse,merge-loops,online-softmax,to-triton"


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


_TYPES = {"bool": bool, "int": int, "str": str}

#: torch.compile's modes as options. mind has no autotuning yet: max-autotune records CUDA
#: graphs, as Inductor's does, with the default kernels.
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True},
    "max-autotune-no-cudagraphs": {},
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
    return Options(**values)
