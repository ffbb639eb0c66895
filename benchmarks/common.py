"""What the benchmark drivers share: how an error and a fallback to eager are reported, how names
are read from the command line, the rows a model driver runs and where it writes them, fresh
compile caches."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator

from benchmarks import CALLER_SET

# The on-disk compile caches, by environment variable, and their folders under `fresh_caches`.
CACHE_DIRS = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "MIND_CACHE_DIR": "mind",
}
# Warnings by which a backend says it ran (part of) the program eagerly instead of compiling it.
FALLBACK_WARNINGS = ("MindFallbackWarning",)


def headline(text: str) -> str:
    """A message's first line, for a table note (the JSON keeps the traceback); a first line that
    ends in ':' (`BackendCompilerFailed: backend='mind' raised:`, mind's `KernelError: Triton
    failed on kernel ...:`) gets the next one too, which says what went wrong underneath."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:2] if len(lines) > 1 and lines[0].endswith(":") else lines[:1])[:500]


def describe(e: BaseException) -> str:
    """The exception's type and headline."""
    return f"{type(e).__name__}: {headline(str(e))}"[:500]


@contextlib.contextmanager
def catch_fallbacks(into: list[str]) -> Iterator[None]:
    """Appends to `into` the headline of every fallback warning raised inside, once each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        line = headline(str(w.message))
        if w.category.__name__ in FALLBACK_WARNINGS and line not in into:
            into.append(line)


#: why a row of a model driver that the deadline stopped, or never started, has no numbers
DEADLINE_REACHED = "the run reached --deadline"


def grid(args: argparse.Namespace) -> Iterator[tuple[str, str, str]]:
    """(model, dtype, mode) of a model driver's `--models`, `--dtypes` and `--modes`: by mode,
    then dtype, then model."""
    return ((m, d, mode) for mode in args.modes for d in args.dtypes for m in args.models)


def write_rows(path: str | None, args: argparse.Namespace, rows: list[dict]) -> None:
    """The driver's settings and rows as JSON at `path` (nothing without one)."""
    if path:
        with open(path, "w") as f:
            json.dump({"settings": vars(args), "rows": rows}, f, indent=1)


def write_outputs(
    rows: list[dict],
    args: argparse.Namespace,
    markdown: Callable[[list[dict], argparse.Namespace], str],
) -> None:
    """A driver's settings and rows as JSON at `--json`, its table as Markdown at `--md` (nothing
    without them): rewritten after every row, so a run cut short keeps what it measured."""
    write_rows(args.json, args, rows)
    if args.md:
        with open(args.md, "w") as f:
            f.write(markdown(rows, args))


def names_arg(choices: tuple[str, ...] | list[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names from `choices`."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in choices]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad)}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def fresh_caches(folder: str | None = None) -> str:
    """Point Inductor's, Triton's and mind's on-disk caches at `folder` (a row's own), so that
    first-call times are cold compiles, not cache hits from an earlier run; without one, those
    the caller named none for (`CALLER_SET`) at a new temporary folder, removed when the process
    exits. A value torch set counts as none: its default folder is shared by every run, and a
    row's process inherits it from the driver (which ran the profiler). Returns Inductor's."""
    fresh = [var for var in CACHE_DIRS if folder is not None or var not in CALLER_SET]
    if fresh and folder is None:
        folder = tempfile.mkdtemp(prefix="mind-bench-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for var in fresh:
        os.environ[var] = os.path.join(folder, CACHE_DIRS[var])
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]
