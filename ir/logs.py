"""mind's logs: Python `logging`, one logger per channel under the `mind` logger.

    MIND_LOGS=passes,fusion,output_code,cache,launch,cudagraphs   # or MIND_LOGS=all

turns channels on: everything they say goes to standard error as `[mind.fusion] ...`. Torch's own
`TORCH_LOGS=mind` (INFO: what each step decided) or `TORCH_LOGS=+mind` (DEBUG: every detail)
shows every channel through torch's handler, since `TORCH_LOGS` takes a module name and `mind` is
one; `logging.getLogger("mind.fusion").setLevel(logging.DEBUG)` works as for any library.

A channel that is off costs its callers one `isEnabledFor` check where they would log, never a
formatted string; nothing logs per launch or per call of compiled code (the launch and cache
channels speak when a module loads, CUDA graphs when they warm up, record or refuse)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

ROOT = "mind"
#: channel -> what it says (`mind-opt --help`, the README)
CHANNELS = {
    "passes": "each pass run: its time, and the ops each graph has after it",
    "fusion": "each pair of nodes fuse weighs: fused (bytes saved) or refused, by which rule",
    "output_code": "the Python module generated for each graph (Triton kernels and call)",
    "cache": "the module and whole-graph caches: hits, misses, writes, files repaired",
    "launch": "kernels bound at load: compiled here or in a worker, in how long (the slowest "
    "named), the launcher chosen",
    "cudagraphs": "CUDA graphs: warm-up, recording, calls run unrecorded and why",
    "autotune": "max-autotune: each launch's candidates timed and the winner, each matmul's "
    "template against ATen",
}


def channel(name: str) -> logging.Logger:
    """The logger of a channel (`mind.<name>`)."""
    if name not in CHANNELS:
        raise ValueError(f"no log channel '{name}' (channels: {', '.join(CHANNELS)})")
    return logging.getLogger(f"{ROOT}.{name}")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time (a test may capture it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(logging.Formatter("[%(name)s] %(message)s"))


def parse_channels(spec: str) -> list[str]:
    """The channels a `MIND_LOGS` value names (comma-separated, `all` for every one)."""
    names = [n for n in (part.strip() for part in spec.split(",")) if n]
    if "all" in names:
        return list(CHANNELS)
    unknown = [n for n in names if n not in CHANNELS]
    if unknown:
        raise ValueError(
            f"MIND_LOGS: unknown channel '{unknown[0]}' (channels: all, {', '.join(CHANNELS)})"
        )
    return names


def set_logs(spec: str) -> None:
    """Turn on exactly the channels `spec` names (`"passes,fusion"`; `""` turns all off): at
    DEBUG, to standard error, not passed on to the `mind` logger (so `TORCH_LOGS=mind` does not
    print them twice)."""
    names = set(parse_channels(spec))
    for name in CHANNELS:
        log = channel(name)
        on = name in names
        log.setLevel(logging.DEBUG if on else logging.NOTSET)
        log.propagate = not on
        if on and _HANDLER not in log.handlers:
            log.addHandler(_HANDLER)
        elif not on:
            log.removeHandler(_HANDLER)


if os.environ.get("MIND_LOGS"):  # else leave the loggers as the program configured them
    set_logs(os.environ["MIND_LOGS"])


@contextmanager
def quiet(logger: logging.Logger) -> Iterator[None]:
    """Mute a (torch) logger that prints, traceback and all, an error mind reports instead. A
    filter that drops every record, not a level: setting a level clears the cache of every logger
    of the process (torch has hundreds), and the verifier mutes one for each op it runs."""
    drop = _Drop()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


class _Drop(logging.Filter):
    """Drops every record (one instance per `quiet`, so that nested ones each remove their own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False
