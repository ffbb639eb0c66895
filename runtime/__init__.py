"""The runtime: import generated Triton modules (kernels + `call`), cached by source hash, run on
the GPU or, for CPU tensors, in Triton's interpreter. It knows only the emitted Python source."""

from .cache import cache_dir, source_key
from .errors import KernelError
from .loader import default_interpret, load

__all__ = ["KernelError", "cache_dir", "default_interpret", "load", "source_key"]
