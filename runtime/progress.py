"""A progress bar on a terminal for long waits (autotuning's compiles and benchmarks): tqdm's,
when tqdm is installed and standard error is a terminal; otherwise nothing is shown."""

from __future__ import annotations

import sys
from typing import Any


class Silent:
    """What stands in for a bar that is not shown."""

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress(total: int, description: str) -> Any:
    """A bar counting to `total`, used as a context manager with `update()`."""
    if total < 2 or not sys.stderr.isatty():
        return Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return Silent()
    return tqdm(total=total, desc=description, leave=False, file=sys.stderr)
