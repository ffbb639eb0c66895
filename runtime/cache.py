"""The on-disk kernel cache: generated modules live under a content hash, so the same source on the
same Triton and device is written once and imported from the same file every time after."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import torch
import triton


def cache_dir() -> Path:
    """`$MIND_CACHE_DIR`, or `~/.cache/mind`."""
    return Path(os.environ.get("MIND_CACHE_DIR") or Path.home() / ".cache" / "mind")


def device_key(interpret: bool) -> str:
    """What compiled code depends on besides its source: the interpreter, or the GPU model."""
    if interpret:
        return "interpreter"
    index = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return f"cuda:{torch.cuda.get_device_name(index)}:sm{major}{minor}"


def source_key(source: str, interpret: bool) -> str:
    """sha256 of the source, the Triton version and the device."""
    digest = hashlib.sha256()
    for part in (source, triton.__version__, device_key(interpret)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cached_file(source: str, key: str) -> Path:
    """The file holding `source` under `key`; written atomically (a temporary file in the same
    folder, renamed into place) only when it is not there yet, so a reader never sees half a file."""
    path = cache_dir() / key[:2] / f"{key}.py"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
