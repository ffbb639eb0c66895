"""Ranks of one gloo process group, each a spawned process, that run one function after another:
what the distributed tests are built on. The ranks start once and serve every test (a process
and a process group cost seconds to start; Dynamo and mind warm up once); each function runs
with a `MIND_CACHE_DIR` of its own, then Dynamo is reset and mind's loaded modules forgotten, so
that the next one compiles (and writes) its own. gloo on CPU; NCCL with a GPU per rank."""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

#: how long a collective may wait for the other ranks before gloo gives up (no test hangs)
COLLECTIVE_TIMEOUT = timedelta(seconds=60)
#: how long the other ranks may take to report once one has failed
GRACE_S = 10.0


def _serve(rank: int, world: int, backend: str, tmp: str, tasks, results) -> None:
    """A rank's life: join the group, run each task `(fn, args, folder)` until None comes."""
    import torch
    import torch.distributed as dist
    from mind.runtime import loader

    faulthandler.enable()  # a rank that crashes in C++ says where it was, one stopped too
    faulthandler.register(signal.SIGTERM, chain=True)
    os.environ.pop("MIND_DUMP_DIR", None)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend,
        init_method=f"file://{Path(tmp) / 'store'}",
        rank=rank,
        world_size=world,
        timeout=COLLECTIVE_TIMEOUT,
    )
    while (task := tasks.get()) is not None:
        fn, args, folder = task
        os.environ["MIND_CACHE_DIR"] = str(Path(folder) / f"cache{rank}")
        try:
            fn(rank, world, *args)
            results.put((rank, None))
        except BaseException:
            results.put((rank, traceback.format_exc()))
        finally:
            torch._dynamo.reset()
            loader._MODULES.clear()
    dist.destroy_process_group()
    # Done and clean: leave without C++ teardown, where gloo after functional collectives
    # sometimes aborts ("terminate called without an active exception"), eager code too.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class RankError(AssertionError):
    """What a function raised on some rank, with each failing rank's traceback."""


class Ranks:
    """`world` ranks that start on the first `run` and again after a run that failed (a rank
    that raised may have left the others waiting in a collective)."""

    def __init__(self, tmp: Path, world: int = 2, backend: str = "gloo"):
        self.tmp, self.world, self.backend = tmp, world, backend
        self.processes: list = []
        self.runs = 0

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        folder = self.tmp / f"group{self.runs}"
        folder.mkdir(parents=True)
        self.tasks = [context.Queue() for _ in range(self.world)]
        self.results = context.Queue()
        self.processes = [
            context.Process(
                target=_serve,
                args=(rank, self.world, self.backend, str(folder), self.tasks[rank], self.results),
            )
            for rank in range(self.world)
        ]
        for process in self.processes:
            process.start()

    def run(self, fn: Callable, *args, timeout: float = 120) -> None:
        """`fn(rank, world, *args)` on every rank (a module-level function: it is pickled);
        raises RankError with the tracebacks of the ranks that raised, TimeoutError when a rank
        has not finished after `timeout` seconds."""
        if not self.processes:
            self._start()
        self.runs += 1
        folder = self.tmp / f"run{self.runs}"
        for tasks in self.tasks:
            tasks.put((fn, args, str(folder)))
        errors: dict[int, str] = {}
        deadline = time.monotonic() + timeout
        for _ in range(self.world):
            try:
                rank, error = self.results.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                if errors:
                    break
                raise TimeoutError(
                    f"{fn.__name__} did not finish on {self.world} ranks in {timeout} s"
                ) from None
            if error is not None:
                errors[rank] = error
                deadline = min(deadline, time.monotonic() + GRACE_S)
        if errors:
            self.close()
            raise RankError(
                "\n".join(f"rank {r} of {self.world}:\n{e}" for r, e in sorted(errors.items()))
            )

    def close(self) -> None:
        """Stop the ranks: each ends once its task is done, or is stopped (printing where it
        was)."""
        if not self.processes:
            return
        for tasks in self.tasks:
            tasks.put(None)
        for process in self.processes:
            process.join(timeout=GRACE_S)
            if process.is_alive():
                process.terminate()
                process.join(timeout=GRACE_S)
            if process.is_alive():
                process.kill()
                process.join()
        for channel in (*self.tasks, self.results):
            channel.close()
        self.processes = []
