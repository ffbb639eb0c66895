"""The on-disk caches, under `$MIND_CACHE_DIR` (default `~/.cache/mind`):

- modules: each generated module under the hash of its source, the Triton version and the
  device (`<key>.py`), written once and imported from the same file every time after;
- graphs: for each compiled graph, the key of its module (`graphs/<key>`), under a hash of
  everything that changes the result (the aten IR text, the pipeline with its options, mind's
  own source, the torch and Triton versions, the device), so a new process that compiles the same
  graph imports its module without running a pass. Triton's own cache keeps the compiled kernels;
  AOTAutograd's cache (mind/compiled.py) names modules by their key too, and reads them here;
- tuning: autotuning's winners (`tuning/<key>.json`, runtime/autotune.py), under a hash of what
  was tuned and the device, each naming the key it was stored under: one that does not parse or
  names another is ignored;
- launches: for each kernel bound through torch's launcher, its cubin and what the launcher
  takes (`launches/<key>.json`, runtime/static_launch.py), under a hash of everything the
  compiled kernel depends on (`launch_key`), so that a new process binds it without Triton's
  JIT, key or cache. Each names its key and holds the sha256 of its content.

A file is trusted only when its content hashes to the key it is stored under (a launch record:
to the hash it holds): one that does not (truncated, edited, another module under the key) is
rewritten from the source in hand, or, for a graph or a launch, ignored and compiled again, which
writes it anew. Files are written atomically (a temporary file in the same folder, renamed into
place), so a reader never sees half a file. A cache that cannot be written is no error: the
caller compiles in memory.
"""

from __future__ import annotations

import hashlib
import json
import py_compile
import re
from functools import cache
from importlib.machinery import SourceFileLoader
from importlib.util import cache_from_source, find_spec
from pathlib import Path
from types import CodeType

import torch
import triton
from mind.ir.files import cache_dir, write_atomic
from mind.ir.logs import channel
from triton._C.libtriton import get_cache_invalidating_env_vars  # what Triton's own key holds

log = channel("cache")
_KEY = re.compile(r"[0-9a-f]{64}$")


def device_key(interpret: bool) -> str:
    """What compiled code depends on besides its source: the interpreter, or the GPU model."""
    if interpret:
        return "interpreter"
    index = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return f"cuda:{torch.cuda.get_device_name(index)}:sm{major}{minor}"


def _digest(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def source_key(source: str, interpret: bool) -> str:
    """sha256 of the source, the Triton version and the device."""
    return _digest(source, triton.__version__, device_key(interpret))


#: the packages whose source decides what mind makes of a graph (not mind.tools)
COMPILER_PACKAGES = (
    "mind", "mind.ir", "mind.dialects", "mind.parser", "mind.passes", "mind.analysis",
    "mind.codegen", "mind.target", "mind.interpreters", "mind.runtime",
)  # fmt: skip


def compiler_sources() -> list[Path]:
    """Every source file of the compiler's packages, loaded or not: passes, codegen and the
    analyses load on first use, after a cache is first asked."""
    folders = {
        Path(folder)
        for name in COMPILER_PACKAGES
        for folder in find_spec(name).submodule_search_locations
    }
    return sorted(
        f
        for folder in folders
        for f in folder.rglob("*")
        if f.suffix in (".py", ".lark") and "__pycache__" not in f.parts
    )


@cache
def mind_fingerprint() -> str:
    """sha256 of the compiler's source, so an edited pass never serves a stale graph."""
    return _digest(*(f"{f.name}:{f.read_text()}" for f in compiler_sources()))


def compiler_key(request: str, interpret: bool) -> str:
    """Everything besides the graph that changes what mind makes of it: `request` (the pipeline
    with its options, or all of the backend's options), mind's own source, the torch and Triton
    versions, the device."""
    return _digest(
        request, mind_fingerprint(), torch.__version__, triton.__version__, device_key(interpret)
    )


def graph_key(aten: str, pipeline: str, interpret: bool) -> str:
    """The key of a compiled graph: everything that changes the module generated for it."""
    return _digest(aten, compiler_key(pipeline, interpret))


def module_path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.py"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def cached_file(source: str, key: str) -> Path | None:
    """The file holding exactly `source` under `key`: written if missing, rewritten if its
    content differs; None when the cache cannot be written (the caller loads from memory)."""
    path = module_path(key)
    found = _read(path)
    if found == source:
        log.debug("module %s: hit", path)
        return path
    try:
        write_atomic(path, source, durable=True)
    except OSError as exc:
        log.info("module %s: cannot write (%s), loading from memory", path, exc.strerror)
        return None
    log.info("module %s: %s", path, "written" if found is None else "repaired (other content)")
    return path


def module_code(source: str, filename: str) -> CodeType:
    """`source`, which the file `filename` holds, compiled: from the bytecode cached beside the
    file as Python caches an imported module's (`__pycache__`), written once, in the form that
    is checked against the hash of the source (PEP 552), so edited source never runs stale
    bytecode. Compiling a large module takes longer than the rest of loading it. Compiled in
    memory when the bytecode cannot be written or read."""
    try:
        if not Path(cache_from_source(filename)).exists():
            mode = py_compile.PycInvalidationMode.CHECKED_HASH
            py_compile.compile(filename, doraise=True, invalidation_mode=mode)
        code = SourceFileLoader("mind_generated", filename).get_code("mind_generated")
    except (OSError, ImportError, ValueError, py_compile.PyCompileError):
        code = None
    return code if code is not None else compile(source, filename, "exec")


def cached_module(module_key: str, interpret: bool) -> str | None:
    """The source stored under `module_key`, when its file is there and hashes to that key."""
    source = _read(module_path(module_key))
    return source if source is not None and source_key(source, interpret) == module_key else None


def cached_graph(key: str, interpret: bool) -> str | None:
    """The source of the module compiled for graph `key`, when the cache holds it intact."""
    entry = cache_dir() / "graphs" / key[:2] / key
    module_key = (_read(entry) or "").strip()
    if not _KEY.match(module_key):
        log.info("graph %s: miss%s", key[:16], "" if not entry.exists() else " (damaged entry)")
        return None
    source = cached_module(module_key, interpret)
    if source is None:
        log.info("graph %s: miss (module %s missing or damaged)", key[:16], module_key[:16])
        return None
    log.info("graph %s: hit, module %s", key[:16], module_key[:16])
    return source


def remember_graph(key: str, source: str, interpret: bool) -> None:
    """Record that graph `key` compiles to `source` (whose module file the loader wrote)."""
    try:
        entry = cache_dir() / "graphs" / key[:2] / key
        write_atomic(entry, source_key(source, interpret) + "\n", durable=True)
    except OSError as exc:  # an unwritable cache: the next process compiles again
        log.info("graph %s: cannot remember (%s)", key[:16], exc.strerror)


def _tuning_path(key: str, interpret: bool) -> Path:
    return (
        cache_dir() / "tuning" / f"{_digest(key, triton.__version__, device_key(interpret))}.json"
    )


def recall_tuning(key: str, interpret: bool) -> dict | None:
    """The record stored for `key` on this device, when it parses and names `key`."""
    text = _read(_tuning_path(key, interpret))
    try:
        record = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("key") == key else None


def remember_tuning(key: str, interpret: bool, record: dict) -> None:
    """Store `record` (with `key` in it) for `key` on this device; an unwritable cache is no
    error: the next process tunes again."""
    try:
        text = json.dumps({**record, "key": key}, indent=1) + "\n"
        write_atomic(_tuning_path(key, interpret), text, durable=True)
    except OSError as exc:
        log.info("tuning %s: cannot remember (%s)", key[:16], exc.strerror)


def launch_key(module_key: str, kernel: str) -> str:
    """The key of a kernel's launch record: its module (`source_key`: the source, Triton's version,
    the device), `kernel` (its name and how it is bound: the signature, config and options),
    mind's own source (the Triton helpers the kernels call, and how a record is written and
    read: the graph key's fingerprint, computed once), the environment variables that change
    Triton's compile, and torch's version (whose launcher reads the record)."""
    environment = repr(sorted(get_cache_invalidating_env_vars().items()))
    return _digest(module_key, kernel, mind_fingerprint(), environment, torch.__version__)


def _launch_path(key: str) -> Path:
    return cache_dir() / "launches" / key[:2] / f"{key}.json"


def _content_hash(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def recall_launch(key: str) -> dict | None:
    """The launch record stored under `key`, when it parses, names `key` and hashes to the hash it
    holds; None otherwise (the kernel compiles, and its record is written again)."""
    path = _launch_path(key)
    text = _read(path)
    if text is None:
        return None
    try:
        stored = json.loads(text)
        record = stored["record"]
        intact = stored["key"] == key and stored["sha256"] == _content_hash(record)
    except (ValueError, TypeError, KeyError):
        intact = False
    if not intact:
        log.info("launch %s: damaged, ignored", path)
        return None
    return record


def remember_launch(key: str, record: dict) -> None:
    """Store the launch record `record` (JSON values) under `key`. Not synced to disk: a record a
    crash leaves torn fails its hash and is written again. An unwritable cache is no error."""
    text = json.dumps({"key": key, "sha256": _content_hash(record), "record": record})
    try:
        write_atomic(_launch_path(key), text)
    except OSError as exc:
        log.info("launch %s: cannot remember (%s)", key[:16], exc.strerror)
