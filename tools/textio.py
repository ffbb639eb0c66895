"""Reading a tool's input and writing its output: `-` is the standard stream, and an output file
is replaced atomically (written beside it, then renamed), so a failure never leaves half a file."""

from __future__ import annotations

import os
import sys
import tempfile


def read_input(path: str) -> tuple[str, str]:
    """The text and the name diagnostics use for it; raises OSError for an unreadable file."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    with open(path, encoding="utf-8") as f:
        return f.read(), path


def write_output(text: str, path: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mind-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
