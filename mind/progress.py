"""A progress bar while a graph compiles, for a person watching a terminal: one step per pass,
then the kernels' compilation. It appears only once compiling has taken DELAY seconds (a large
graph), and never when standard error is not a terminal or tqdm is not installed (an optional
dependency: the `test` extra has it); when the graph is done, it goes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

#: seconds of compiling before the bar appears, and between redraws
DELAY, REFRESH = 2.0, 0.1


@contextmanager
def progress(
    graph: str, steps: int, stream: TextIO | None = None
) -> Iterator[Callable[[str], None]]:
    """Yields `done(what)`, to call after each of `steps` steps (`what`: the step just done)."""
    stream = stream or sys.stderr
    bar = _bar(graph, steps, stream) if stream.isatty() else None
    if bar is None:
        yield lambda what: None
        return

    def done(what: str) -> None:
        bar.set_postfix_str(what, refresh=False)
        bar.update()

    try:
        yield done
    finally:
        bar.close()


def _bar(graph: str, steps: int, stream: TextIO):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(
        total=steps,
        desc=f"mind: {graph}",
        file=stream,
        delay=DELAY,
        mininterval=REFRESH,
        leave=False,
        unit="step",
    )
