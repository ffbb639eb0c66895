"""The runtime: import generated Triton modules (kernels + `call`), cached by source hash, run on
the GPU or, for CPU tensors, in Triton's interpreter. It knows only the emitted Python source (and,
for the graph cache, the text of the graph it came from, as an opaque key)."""

from .cache import (
    cache_dir,
    cached_graph,
    cached_module,
    compiler_key,
    graph_key,
    remember_graph,
    source_key,
)
from .errors import CheckFailed, KernelError
from .loader import at_once, default_interpret, load, overlapped

__all__ = [
    "CheckFailed",
    "at_once",
    "KernelError",
    "cache_dir",
    "cached_graph",
    "cached_module",
    "compiler_key",
    "default_interpret",
    "graph_key",
    "load",
    "overlapped",
    "remember_graph",
    "source_key",
]
