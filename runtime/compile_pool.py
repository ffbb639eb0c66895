"""Triton compilation in worker processes, as Inductor's async compile does.

Compiling a kernel (Triton's front end, MLIR, ptxas) takes a fraction of a second to seconds, and
a model's graph has dozens. The loader runs a generated module with its bindings deferred
(`launch.deferred`) and compiles its kernels before binding them: it takes kernels from the
module's list and compiles them itself while every ready worker takes others. A worker runs the
module's source the same way (under the same module name, which Triton's cache key includes;
once per module, not per kernel), compiles its kernel with the same arguments for the target the
loader names, and leaves it in Triton's on-disk cache, where the loader's bind then finds it. A
worker touches no GPU: it makes no CUDA context and loads nothing (`Binding.precompile`). What a
worker fails on, the loader compiles again when it binds, so errors are reported as usual.
Results do not depend on who compiled what.

Autotuned launches (runtime/autotune.py) compile every candidate here; the loading process tunes
each launch as soon as all its candidates are compiled, while the workers compile the others,
with a progress bar on a terminal.

The workers are forked from one server process (`python -m mind.runtime.compile_worker`), which
imports torch and Triton once for all of them, and each talks to the loader over its own pair of
pipes. Unlike multiprocessing's spawn, the server never re-runs the user's main module, which
may have no `if __name__ == "__main__"` guard. It starts when the backend first sees CUDA
inputs, so that its start-up overlaps tracing and code generation; a worker that becomes ready
while a module's kernels compile joins in, and until then the loader does not wait for it.
`MIND_COMPILE_WORKERS` sets how many; 0 or 1 compiles in the loading process only."""

from __future__ import annotations

import functools
import linecache
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections import OrderedDict
from typing import Any, BinaryIO

from mind.ir.logs import channel

from .autotune import Tuned
from .cache import module_code
from .launch import Binding, deferred, target_of
from .progress import Silent, progress

log = channel("launch")
#: how long a helper waits for its worker to become ready before looking at the work left
_READY_POLL_S = 0.05


def workers() -> int:
    """`MIND_COMPILE_WORKERS`, or half the CPUs (at most 8): the loading process compiles too,
    and a crowd of workers starting at once would slow its tracing down. None without `fork`."""
    value = os.environ.get("MIND_COMPILE_WORKERS")
    wanted = int(value) if value else min(8, (os.cpu_count() or 1) // 2)
    return wanted if hasattr(os, "fork") else 0


class Worker:
    """One compile process, forked by the pool's server; ready once the server has imported what
    compiling needs. `jobs` and `results` are the loader's ends of its pipes."""

    def __init__(self, jobs: BinaryIO, results: BinaryIO):
        self.jobs, self.results = jobs, results
        self.ready = threading.Event()
        self.dead = False
        threading.Thread(target=self._wait_ready, daemon=True).start()

    def _wait_ready(self) -> None:
        try:
            _receive(self.results)
            self.ready.set()
            log.debug("compile worker: ready")
        except (OSError, EOFError, struct.error, pickle.UnpicklingError):
            self.dead = True  # a worker that died starting is never used
            log.info("compile worker: died starting")

    def compile(self, job: tuple) -> bool:
        """Send `job` (module, source, filename, binding index, target) and wait for whether the
        kernel compiled."""
        try:
            _send(self.jobs, job)
            return bool(_receive(self.results))
        except (OSError, EOFError, struct.error, pickle.UnpicklingError):
            self.ready.clear()  # dead: the loader compiles what is left
            self.dead = True
            log.info("compile worker: died, the loader compiles the rest")
            return False

    def stop(self) -> None:
        """Close its job stream: the worker exits at its end."""
        try:
            self.jobs.close()
        except OSError:  # (a worker that died broke the pipe)
            pass


class Pool:
    """Worker processes that take kernels from the loader's list while it compiles the rest
    itself: a pool still starting costs nothing, a worker ready meanwhile joins in."""

    def __init__(self, size: int):
        pipes = [(os.pipe(), os.pipe()) for _ in range(size)]  # (jobs, results) per worker
        theirs = [fd for jobs, results in pipes for fd in (jobs[0], results[1])]
        command = [sys.executable, "-m", "mind.runtime.compile_worker", *map(str, theirs)]
        self.server = None
        try:
            if size:
                self.server = subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        self.workers = [
            Worker(os.fdopen(jobs[1], "wb"), os.fdopen(results[0], "rb")) for jobs, results in pipes
        ]

    def compile(
        self,
        module: str,
        source: str,
        filename: str,
        bindings: list[Binding],
        tuned: list[Tuned] = (),
        bar=None,
    ) -> None:
        """Compile every binding's kernel, here and in the workers ready now or later, and tune
        each of `tuned` here once its candidates are compiled; returns when all is done (a
        kernel that failed is compiled again, here, when it binds, and reports its error
        then)."""
        todo = list(reversed(range(len(bindings))))
        finished: set[int] = set()
        position = {id(b): i for i, b in enumerate(bindings)}
        workers = [w for w in self.workers if not w.dead]
        targets = {d: target_of(d) for d in {b.device for b in bindings}} if workers else {}
        pending = list(tuned)
        changed = threading.Condition()
        helped = set()

        def take() -> int | None:
            with changed:
                return todo.pop() if todo else None

        def finish(index: int) -> None:
            with changed:
                finished.add(index)
                changed.notify_all()
            (bar or Silent()).update()

        def help(worker: Worker) -> None:
            while todo and not worker.dead:
                if not worker.ready.wait(_READY_POLL_S):
                    continue
                if (index := take()) is None:
                    return
                helped.add(id(worker))
                job = (module, source, filename, index, targets[bindings[index].device])
                worker.compile(job)
                finish(index)

        def ready() -> Tuned | None:
            with changed:
                done = [t for t in pending if all(position[id(b)] in finished for b in t.bindings)]
            return done[0] if done else None

        helpers = [threading.Thread(target=help, args=(w,)) for w in workers]
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
            "%s: %d kernels, %d compiled here, the others by %d workers of %d",
            module, len(bindings), here, len(helped), len(self.workers),
        )  # fmt: skip

    def shutdown(self) -> None:
        """Stop the workers (each exits at the end of its job stream) and their server."""
        for worker in self.workers:
            worker.stop()
        if self.server is not None:
            self.server.wait()


_POOL: Pool | None = None


def pool() -> Pool | None:
    """The worker pool, started on first use; None when compiling in-process."""
    global _POOL
    if _POOL is None and workers() > 1:
        _POOL = Pool(workers())
    return _POOL


def start() -> None:
    """Start the workers early, in the background; meanwhile this process computes what its
    own first compile needs (Triton's cache key, a hash of Triton's install: half a second), in
    a thread, once."""
    if pool() is not None:
        _warm_up_here()


@functools.cache
def _warm_up_here() -> None:
    from triton.runtime.cache import triton_key

    threading.Thread(target=triton_key, daemon=True).start()


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


#: in a worker: the bindings of the modules it compiled for lately, by name, file and source
_MODULES: OrderedDict[tuple[str, str, str], list[Binding]] = OrderedDict()
#: how many modules a worker keeps (the loader sends one module's kernels at a time)
_KEPT_MODULES = 4


def compile_kernel(module: str, source: str, filename: str, index: int, target: Any) -> None:
    """Compile the module's `index`-th binding for `target` as the loader will bind it (in a
    worker), into Triton's cache. The module gets the loader's name (Triton's cache key includes
    it) and runs once for all its kernels."""
    key = (module, filename, source)
    if key not in _MODULES:
        with deferred() as bindings:
            exec_source(source, filename, {"__name__": module})
        _MODULES[key] = bindings
        while len(_MODULES) > _KEPT_MODULES:
            _MODULES.popitem(last=False)
    _MODULES[key][index].precompile(target)


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
