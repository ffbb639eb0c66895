"""Triton compilation in worker processes, as Inductor's async compile does.

Compiling a kernel (Triton's front end, MLIR, ptxas) takes a fraction of a second to seconds, and a
model's graph has dozens. The loader runs a generated module with its bindings deferred
(`launch.deferred`) and submits its kernels (a `Batch`): every ready worker takes a kernel left of
the oldest batch, the longest to compile first (`longest_first`), from then on, while the loader
goes on; when the loader waits for the batch, it compiles what no worker took yet itself and binds
each kernel as soon as it is compiled. Inside `loader.overlapped` the loader waits only at the end
of the block: a training graph's forward kernels compile while AOTAutograd hands mind the backward
and its passes run. The `launch` log channel says how long each kernel took to compile and names
each module's slowest, which a first call waits for at the least: ResNet-18's bf16 inference graph
has 17 kernels, which compile in 2.5 s one after another for an H100 target, 0.9 s of it its stem
convolution (a matmul template with a gather prologue). A worker runs the module's kernels as the
loader does, at the same lines, which Triton's cache key includes (once per module, not per
kernel), compiles one from its binding's `Spec` for the target the loader names, and leaves it in
Triton's on-disk cache, where the loader's bind then finds it (runtime/compile_job.py). A worker
touches no GPU and imports no torch: it makes no CUDA context and loads nothing. What a worker
fails on, the loader compiles again when it binds, so errors are reported as usual. Results do
not depend on who compiled what.

Autotuned launches (runtime/autotune.py) compile every candidate here; the loading process tunes
each launch as soon as all its candidates are compiled, while the workers compile the others,
with a progress bar on a terminal.

The workers are forked from one server process (`python -m mind.runtime.compile_worker`), which
imports Triton once for all of them, and each talks to the loader over its own pair of pipes.
Unlike multiprocessing's spawn, the server never re-runs the user's main module, which may have
no `if __name__ == "__main__"` guard. It starts when AOTAutograd first traces a graph with CUDA
inputs, so that its start-up overlaps tracing and code generation, and a process whose graphs all
load from AOTAutograd's cache (kernels bound from their launch records) starts none. A worker
that becomes ready while a module's kernels compile joins in, and until then the loader does not
wait for it. `MIND_COMPILE_WORKERS` sets how many; 0 or 1 compiles in the loading process only."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, BinaryIO

from mind.ir.logs import channel

from .autotune import Tuned
from .cache import module_code
from .compile_job import receive, remember_source, send
from .launch import Binding, target_of
from .progress import Silent

log = channel("launch")


#: the most workers by default, as Inductor's compile threads
MAX_WORKERS = 32


def workers() -> int:
    """`MIND_COMPILE_WORKERS`, or one per CPU this process may run on but the loader's own (it
    compiles too), at most MAX_WORKERS. Half the CPUs (at most 8) left half of an H200 host's 16
    idle: GPT-2 and BERT's first calls took 1.0-1.5 s longer there than with 15. 0 without
    `fork`."""
    value = os.environ.get("MIND_COMPILE_WORKERS")
    wanted = int(value) if value else min(MAX_WORKERS, _cpus() - 1)
    return wanted if hasattr(os, "fork") else 0


def _cpus() -> int:
    """The CPUs this process may run on (a container's or `taskset`'s share, where the OS says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Worker:
    """One compile process, forked by the pool's server; ready once the server has imported what
    compiling needs. `jobs` and `results` are the loader's ends of its pipes."""

    def __init__(self, jobs: BinaryIO, results: BinaryIO):
        self.jobs, self.results = jobs, results
        self.ready = threading.Event()
        self.dead = False

    def start(self) -> bool:
        """Wait until the worker says it is ready; False if it died starting (never used)."""
        try:
            receive(self.results)
        except (OSError, EOFError, struct.error, pickle.UnpicklingError):
            self.dead = True
            log.info("compile worker: died starting")
            return False
        self.ready.set()
        log.debug("compile worker: ready")
        return True

    def compile(self, job: tuple) -> float | None:
        """Send `job` (module, source, filename, the binding's `Spec`, target) and wait for the
        seconds the kernel took to compile; None where it failed."""
        try:
            send(self.jobs, job)
            seconds = receive(self.results)
        except (OSError, EOFError, struct.error, pickle.UnpicklingError):
            self.ready.clear()  # dead: the loader compiles what is left
            self.dead = True
            log.info("compile worker: died, the loader compiles the rest")
            return None
        return seconds

    def stop(self) -> None:
        """Close its job stream: the worker exits at its end."""
        try:
            self.jobs.close()
        except OSError:  # (a worker that died broke the pipe)
            pass


class Batch:
    """A module's kernels, compiling: the pool's ready workers take them in order, from the
    moment they are submitted, while the loader goes on (lowering a training graph's backward
    while its forward's kernels compile); `wait` compiles the rest here."""

    def __init__(self, pool: Pool, module: str, source: str, filename: str, bindings: list):
        self.pool, self.bindings = pool, bindings
        self.module, self.source, self.filename = module, source, filename
        self.todo = longest_first(bindings)
        self.position = {id(b): i for i, b in enumerate(bindings)}
        #: indices compiled (or failed), in the order they finished
        self.finished: list[int] = []
        #: how many the workers are compiling now
        self.running = 0
        self.here = 0
        #: seconds each kernel took to compile (by index), the failed ones left out
        self.seconds: dict[int, float] = {}

    def job(self, index: int) -> tuple:
        """What a worker is sent for the `index`-th kernel (`compile_job.compile_kernel`'s
        arguments)."""
        binding = self.bindings[index]
        target = self.pool.target(binding.device)
        return (self.module, self.source, self.filename, binding.spec(), target)

    def done(self, index: int, seconds: float | None) -> None:
        self.finished.append(index)
        if seconds is not None:
            self.seconds[index] = seconds
        self.pool.changed.notify_all()

    def wait(
        self, tuned: list[Tuned] = (), bar=None, compiled: Callable[[Any], None] = lambda b: None
    ) -> None:
        """Return once every kernel is compiled, compiling those no worker took yet here; hand
        each binding to `compiled` as soon as it is compiled (the loader binds it while the
        workers compile others), and tune each of `tuned` once its candidates are compiled. A
        kernel that failed is compiled again, here, when it binds, and reports its error then."""
        bar = bar or Silent()
        pending, handed, done = list(tuned), 0, set()
        changed = self.pool.changed
        while True:
            index = None
            with changed:
                fresh, handed = self.finished[handed:], len(self.finished)
                done.update(fresh)
                ready = [t for t in pending if all(self._compiled(b, done) for b in t.bindings)]
                if not fresh and not ready:
                    if self.todo:
                        index = self.todo.popleft()
                    elif self.running:
                        changed.wait()
                        continue
                    else:
                        break
            for i in fresh:
                compiled(self.bindings[i])
                bar.update()
            for launch in ready:
                pending.remove(launch)
                launch.choose()
                bar.update()
            if index is not None:
                seconds = _compile(self.bindings[index])
                self.here += 1
                with changed:
                    self.done(index, seconds)
        if not self.bindings:  # (every kernel of the module had a launch record)
            return
        log.info(
            "%s: %d kernels, %d compiled here, the others by %d workers%s",
            self.module, len(self.bindings), self.here, len(self.pool.workers), self._slowest(),
        )  # fmt: skip
        count_kernels(here=self.here, workers=len(self.bindings) - self.here)

    def _compiled(self, binding: Binding, done: set[int]) -> bool:
        """Whether `binding` is compiled, or is not the batch's to compile (a launch record's)."""
        index = self.position.get(id(binding))
        return index is None or index in done

    def _slowest(self) -> str:
        """The kernel that took longest to compile, which a first call waits for at the least
        (a matmul template's compile is several times a pointwise kernel's)."""
        if not self.seconds:
            return ""
        index = max(self.seconds, key=self.seconds.get)
        return f"; the slowest, {self.bindings[index].name}, {1e3 * self.seconds[index]:.0f} ms"


def longest_first(bindings: list[Binding]) -> deque[int]:
    """The order workers take a module's kernels in: the longest to compile first (list
    scheduling's LPT rule), so that no long compile starts last, when the others are done, for
    the first call to wait for alone. The length is guessed from the source: a kernel with a
    matmul first (a template's `dot` pipeline compiles in 0.7-0.9 s for an H100, a pointwise
    kernel in 0.05-0.15 s), then the longer source. ResNet-18's bf16 training backward has 43
    kernels; compiled one by one for an H100 target, then laid out on 15 workers, they end at
    0.72 s in the module's order and at 0.51 s (the longest kernel's time) in this one."""

    def guess(index: int) -> tuple[bool, int]:
        source = getattr(bindings[index].kernel, "src", "")
        return "dot(" in source, len(source)

    return deque(sorted(range(len(bindings)), key=guess, reverse=True))


def count_kernels(**kernels: int) -> None:
    """`counters["mind_compile"]`: kernels compiled in the loading process (`here`), by the
    workers (`workers`), or bound from launch records (`recorded`, the loader's count), for
    benchmarks and tests (the models benchmark reports a first call's)."""
    from torch._dynamo.utils import counters

    for kind, count in kernels.items():
        counters["mind_compile"][kind] += count


class Pool:
    """Worker processes that take kernels from the batches submitted, oldest first, while the
    loader goes on and, once it waits for a batch, compiles the rest of it itself: a pool still
    starting costs nothing, a worker ready meanwhile joins in."""

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
        self.changed = threading.Condition()
        self.queue: deque[Batch] = deque()
        self.closed = False
        self._targets: dict[Any, Any] = {}
        for worker in self.workers:
            threading.Thread(target=self._serve, args=(worker,), daemon=True).start()

    def submit(self, module: str, source: str, filename: str, bindings: list[Binding]) -> Batch:
        """Hand the bindings' kernels to the workers; `wait` on the batch before binding them."""
        batch = Batch(self, module, source, filename, bindings)
        if self.workers and bindings:
            for device in {b.device for b in bindings}:  # (asked here: CUDA in this thread)
                self.target(device)
            with self.changed:
                self.queue.append(batch)
                self.changed.notify_all()
        return batch

    def target(self, device: Any) -> Any:
        if device not in self._targets:
            _preparing().join()  # (Triton's driver, made there: not made twice at once)
            self._targets[device] = target_of(device)
        return self._targets[device]

    def _serve(self, worker: Worker) -> None:
        """A worker's helper thread: once the worker is ready, send it the next kernel left."""
        if not worker.start():
            return
        while not worker.dead:
            with self.changed:
                while (taken := self._take()) is None:
                    if self.closed:
                        return
                    self.changed.wait()
            batch, index = taken
            seconds = worker.compile(batch.job(index))
            if seconds is not None:
                name = batch.bindings[index].name
                log.debug("kernel %s: compiled by a worker in %.1f ms", name, 1e3 * seconds)
            with self.changed:
                batch.running -= 1
                batch.done(index, seconds)

    def _take(self) -> tuple[Batch, int] | None:
        """The next kernel no one took yet, of the oldest batch (holding `changed`)."""
        while self.queue and not self.queue[0].todo:
            self.queue.popleft()
        if not self.queue:
            return None
        batch = self.queue[0]
        batch.running += 1
        return batch, batch.todo.popleft()

    def shutdown(self) -> None:
        """Stop the workers (each exits at the end of its job stream) and their server."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()
        for worker in self.workers:
            worker.stop()
        if self.server is not None:
            self.server.wait()


_POOL: Pool | None = None
#: where a module's kernels compile without workers: in the loading process, when it waits
_ALONE = Pool(0)


def pool() -> Pool | None:
    """The worker pool, started on first use; None when compiling in-process."""
    global _POOL
    if _POOL is None and workers() > 1:
        _POOL = Pool(workers())
    return _POOL


def start() -> None:
    """Start the workers early, in the background; meanwhile this process prepares what its own
    first compile needs, in a thread, once (`_preparing`)."""
    if pool() is not None:
        _preparing()


@functools.cache
def _preparing() -> threading.Thread:
    thread = threading.Thread(target=_prepare, daemon=True)
    thread.start()
    return thread


def _prepare() -> None:
    """Triton's cache key (a hash of Triton's install: half a second) and its GPU driver, whose
    first use builds its C utilities (a C compiler's run: 0.4 s of an H200 host's first call,
    with an empty Triton cache, else a load), both while Dynamo, AOTAutograd and the passes run,
    not on the first call's path (where the first target is asked for)."""
    from triton.runtime import driver
    from triton.runtime.cache import triton_key

    triton_key()
    with contextlib.suppress(Exception):  # no GPU driver: what needs one says so itself
        driver.active.utils  # noqa: B018 (the first use makes it)


def submit(module: str, source: str, filename: str, bindings: list[Binding]) -> Batch:
    """A generated module's kernels handed to the worker pool, when one runs and there is more
    than one kernel, else a batch that `wait` compiles in this process alone."""
    executor = pool() if len(bindings) > 1 else None
    return (executor or _ALONE).submit(module, source, filename, bindings)


def _compile(binding: Binding) -> float | None:
    """Compile ahead of binding; the seconds it took, or None where it failed: a failure is
    reported when the kernel binds (or, for an autotuning candidate, makes it lose)."""
    start = time.perf_counter()
    try:
        binding.compile()
    except Exception:
        return None
    return time.perf_counter() - start


def exec_source(source: str, filename: str, namespace: dict) -> None:
    """Run a generated module's source, which the file `filename` holds: from the bytecode cached
    beside it (`module_code`). A module not written to a file (an unwritable cache) goes into
    `linecache`, where tracebacks and Triton (which reads a kernel's source) find it."""
    if os.path.exists(filename):
        code = module_code(source, filename)
    else:
        remember_source(source, filename)
        code = compile(source, filename, "exec")
    exec(code, namespace)
