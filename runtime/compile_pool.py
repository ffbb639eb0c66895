"""Triton compilation in worker processes, as Inductor's async compile does.

Compiling a kernel (Triton's front end, MLIR, ptxas) takes a fraction of a second to seconds, and
a model's graph has dozens. The loader runs a generated module with its bindings deferred
(`launch.deferred`) and compiles its kernels before binding them: it takes kernels from the
module's list and compiles them itself while every ready worker takes others. A worker runs the
module's source the same way (under the same module name, which Triton's cache key includes),
compiles its kernel with the same arguments and leaves it in Triton's on-disk cache, where the
loader's bind then finds it. What a worker fails on, the loader compiles again when it binds, so
errors are reported as usual. Results do not depend on who compiled what.

Autotuned launches (runtime/autotune.py) compile every candidate here; the loading process tunes
each launch as soon as all its candidates are compiled, while the workers compile the others,
with a progress bar on a terminal.

Workers are plain subprocesses (`python -m mind.runtime.compile_worker`) that talk over their
pipes: unlike multiprocessing's spawn, they never re-run the user's main module, which may have
no `if __name__ == "__main__"` guard. They start (and import torch and Triton) when the backend
first sees CUDA inputs, so that start-up overlaps tracing and code generation; until a worker is
ready, the loader does not wait for it. `MIND_COMPILE_WORKERS` sets how many; 0 or 1 compiles in
the loading process only."""

from __future__ import annotations

import linecache
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import BinaryIO

from mind.ir.logs import channel

from .autotune import Tuned
from .cache import module_code
from .launch import Binding, deferred
from .progress import Silent, progress

log = channel("launch")


def workers() -> int:
    """`MIND_COMPILE_WORKERS`, or half the CPUs (at most 8): the loading process compiles too,
    and a crowd of workers starting at once would slow its tracing down."""
    value = os.environ.get("MIND_COMPILE_WORKERS")
    return int(value) if value else min(8, (os.cpu_count() or 1) // 2)


class Worker:
    """One compile subprocess; ready once it has imported what compiling needs."""

    def __init__(self):
        command = [sys.executable, "-m", "mind.runtime.compile_worker"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ready = threading.Event()
        threading.Thread(target=self._wait_ready, daemon=True).start()

    def _wait_ready(self) -> None:
        try:
            _receive(self.process.stdout)
            self.ready.set()
            log.debug("compile worker %d: ready", self.process.pid)
        except (OSError, EOFError, struct.error):  # a worker that died starting is never used
            log.info("compile worker %d: died starting", self.process.pid)

    def compile(self, job: tuple) -> bool:
        try:
            _send(self.process.stdin, job)
            return bool(_receive(self.process.stdout))
        except (OSError, EOFError, struct.error):
            self.ready.clear()  # dead: the loader compiles what is left
            log.info("compile worker %d: died, the loader compiles the rest", self.process.pid)
            return False

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait()


class Pool:
    """Worker subprocesses that take kernels from the loader's list while it compiles the rest
    itself: a pool still starting costs nothing, a ready one shares the work."""

    def __init__(self, size: int):
        self.workers = [Worker() for _ in range(size)]

    def compile(
        self,
        module: str,
        source: str,
        filename: str,
        bindings: list[Binding],
        tuned: list[Tuned] = (),
        bar=None,
    ) -> None:
        """Compile every binding's kernel, here and in the ready workers, and tune each of
        `tuned` here once its candidates are compiled; returns when all is done (a kernel that
        failed is compiled again, here, when it binds, and reports its error then)."""
        todo = list(reversed(range(len(bindings))))
        finished: set[int] = set()
        position = {id(b): i for i, b in enumerate(bindings)}
        pending = list(tuned)
        changed = threading.Condition()

        def take() -> int | None:
            with changed:
                return todo.pop() if todo else None

        def finish(index: int) -> None:
            with changed:
                finished.add(index)
                changed.notify_all()
            (bar or Silent()).update()

        def help(worker: Worker) -> None:
            while worker.ready.is_set() and (index := take()) is not None:
                worker.compile((module, source, filename, index))
                finish(index)

        def ready() -> Tuned | None:
            with changed:
                done = [t for t in pending if all(position[id(b)] in finished for b in t.bindings)]
            return done[0] if done else None

        helpers = [
            threading.Thread(target=help, args=(w,)) for w in self.workers if w.ready.is_set()
        ]
        for thread in helpers:
            thread.start()
        here = 0
        while True:
            if (launch := ready()) is not None:
                pending.remove(launch)
                launch.choose()
                (bar or Silent()).update()
            elif (index := take()) is not None:
                _compile(bindings[index])
                finish(index)
                here += 1
            elif pending and any(t.is_alive() for t in helpers):
                with changed:
                    changed.wait(timeout=0.1)
            else:
                break
        for thread in helpers:
            thread.join()
        for launch in pending:
            launch.choose()
        log.info(
            "%s: %d kernels, %d compiled here, the others by %d ready workers of %d",
            module, len(bindings), here, len(helpers), len(self.workers),
        )  # fmt: skip

    def shutdown(self) -> None:
        for worker in self.workers:
            worker.stop()


_POOL: Pool | None = None


def pool() -> Pool | None:
    """The worker pool, started on first use; None when compiling in-process."""
    global _POOL
    if _POOL is None and workers() > 1:
        _POOL = Pool(workers())
    return _POOL


def start() -> None:
    """Start the workers early, in the background."""
    pool()


def compile_all(
    module: str, source: str, filename: str, bindings: list[Binding], tuned: list[Tuned] = ()
) -> None:
    """Compile a generated module's kernels before they bind, in parallel when a pool runs, and
    tune its tuned launches meanwhile (a progress bar shows both when there are any)."""
    executor = pool() if len(bindings) > 1 else None
    total = (len(bindings) if executor is not None else 0) + len(tuned)
    with progress(total if tuned else 0, "mind: tuning kernels") as bar:
        if executor is not None:
            executor.compile(module, source, filename, bindings, tuned, bar)
        for launch in tuned if executor is None else ():
            launch.choose()
            bar.update()


def _compile(binding: Binding) -> None:
    """Compile ahead of binding; a failure is reported when the kernel binds (or, for an
    autotuning candidate, makes it lose)."""
    try:
        binding.compile()
    except Exception:
        pass


def exec_source(source: str, filename: str, namespace: dict) -> None:
    """Run a generated module's source, which the file `filename` holds: from the bytecode cached
    beside it (`module_code`). A module not written to a file (an unwritable cache) goes into
    `linecache`, where tracebacks and Triton (which reads a kernel's source) find it."""
    if os.path.exists(filename):
        code = module_code(source, filename)
    else:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
    exec(code, namespace)


def compile_kernel(module: str, source: str, filename: str, index: int) -> None:
    """Compile the module's `index`-th binding as the loader will bind it (in a worker). The
    module gets the loader's name: Triton's cache key includes it."""
    namespace: dict = {"__name__": module}
    with deferred() as bindings:
        exec_source(source, filename, namespace)
    bindings[index].compile()


# -- the pipe protocol: a 4-byte length, then a pickle -----------------------------------------
def _send(stream: BinaryIO, value: object) -> None:
    data = pickle.dumps(value)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> object:
    header = stream.read(4)
    if len(header) < 4:
        raise EOFError
    return pickle.loads(stream.read(struct.unpack("<I", header)[0]))


def serve(jobs: BinaryIO, results: BinaryIO) -> None:
    """A worker's loop: say it is ready, then compile each job it is sent and answer whether it
    worked."""
    import torch  # noqa: F401  (what compiling needs, imported before saying ready)
    import triton  # noqa: F401

    _send(results, "ready")
    while True:
        try:
            job = _receive(jobs)
        except EOFError:
            return
        try:
            compile_kernel(*job)
            ok = True
        except Exception:  # the loader compiles it again and reports the error
            ok = False
        _send(results, ok)
