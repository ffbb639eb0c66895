"""Files mind keeps between processes: where its caches live, and how one is written so that no
reader ever sees half of it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """`$MIND_CACHE_DIR`, or `~/.cache/mind`."""
    return Path(os.environ.get("MIND_CACHE_DIR") or Path.home() / ".cache" / "mind")


def write_atomic(path: Path, data: str | bytes, durable: bool = False) -> None:
    """Write `data` to `path` through a temporary file beside it, renamed into place (synced to
    disk first when `durable`); the folders are made as needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:16]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
