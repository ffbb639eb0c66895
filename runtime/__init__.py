"""The runtime: import generated Triton modules (kernels + `call`), cached by source hash, run on
the GPU or, for CPU tensors, in Triton's interpreter. It knows only the emitted Python source (and,
for the graph cache, the text of the graph it came from, as an opaque key).

Every name here loads on first use: a compile worker imports `mind.runtime.compile_job`, and
with it this package, without torch (runtime/compile_job.py)."""

from importlib import import_module as _import_module

_LAZY = {
    "CheckFailed": ".errors",
    "KernelError": ".errors",
    "at_once": ".loader",
    "cache_dir": ".cache",
    "cached_graph": ".cache",
    "cached_module": ".cache",
    "compiler_key": ".cache",
    "default_interpret": ".loader",
    "graph_key": ".cache",
    "load": ".loader",
    "overlapped": ".loader",
    "remember_graph": ".cache",
    "source_key": ".cache",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mind.runtime' has no attribute '{name}'")
    return getattr(_import_module(_LAZY[name], __name__), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = sorted(_LAZY)
