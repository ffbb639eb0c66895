"""Reading a tool's input and writing its output: `-` is the standard stream, and an output file
is replaced atomically (written beside it, then renamed), so a failure never leaves half a file.
The file gets the mode a plain `open` would give it: the umask's for a new file, the old one's
for a replaced file."""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile


def read_input(path: str) -> tuple[str, str]:
    """The text and the name diagnostics use for it; raises OSError for an unreadable file, and
    for one that is not UTF-8 text (saying where the first bad byte is)."""
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        with open(path, "rb") as f:
            data, name = f.read(), path
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise OSError(
            errno.EILSEQ, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at {line}:{column}"
        ) from None


def write_output(data: str | bytes, path: str) -> None:
    """Write text (UTF-8) or bytes to `path`; raises OSError (a missing folder, no permission)."""
    if path == "-":
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".mind-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _mode(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
