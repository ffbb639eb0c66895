"""Rows in worker processes: a fresh process per row, up to `jobs` at a time, compiling side by
side but timing one at a time.

A fresh process per row is what makes a row's numbers its own: no compiled code, in-memory
kernel cache or CUDA-graph pool left by an earlier row, a cold on-disk cache of its own, and an
illegal address, a hang or an OOM ends that row only. The price, a Python and torch start-up per
row, is paid side by side with the other rows' compiles.

`TimingLock` keeps the timing honest: rows hold it shared while they start up, build, compile,
warm up and check (work that may overlap), and until their process has exited (its teardown,
which the lock did not cover before: on an H100, rows run 8 at a time measured up to twice the
host time of rows run 1 or 4 at a time), and alone while they time and profile, so that no
other row's work runs beside a timing.

A worker is `python3 -m benchmarks.workers TASK FOLDER FD`: it writes its messages, one JSON
list a line, to the pipe FD, and everything else (warnings, compiler logs) to FOLDER/log.txt.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import DEADLINE_REACHED, fresh_caches

if TYPE_CHECKING:
    from benchmarks.model_row import Task

ROOT = Path(__file__).resolve().parent.parent  # where `-m benchmarks.workers` imports from
LOG_TAIL = 3000  # characters of a failed row's log kept in its row


class TimingLock:
    """A readers-writer lock between processes, on two files (flock, released by the kernel when
    a process dies). `shared` holders run together; `exclusive` waits for them to leave and runs
    alone. A waiting `exclusive` closes the gate to new `shared` holders, so that a stream of
    overlapping compiles cannot starve a timing. Never nest them: a shared holder that asks
    again can wait behind a timing that waits for it. `notify('wait')` and `notify('go')`
    bracket each wait, so that the parent does not count waiting against a row's time limit."""

    def __init__(self, folder: str | Path, notify: Callable[[str], None] = lambda _: None):
        self.folder = Path(folder)
        self.notify = notify

    @contextlib.contextmanager
    def _flock(self, name: str, how: int) -> Iterator[None]:
        with open(self.folder / name, "a") as f:
            fcntl.flock(f, how)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _through_gate(self) -> None:
        """Waits behind a timing that waits for the room (a shared holder enters after it)."""
        self.notify("wait")
        with self._flock("gate", fcntl.LOCK_EX):
            pass

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self._through_gate()
        with self._flock("room", fcntl.LOCK_SH):
            self.notify("go")
            yield

    def shared_until_exit(self) -> None:
        """Holds the lock shared for the rest of the process: the kernel releases it when the
        process is gone, after its teardown (the CUDA context, compile pools, caches removed),
        which is work a timing must not share the machine with either."""
        self._through_gate()
        # a descriptor no object owns: nothing closes it before the process ends
        fcntl.flock(os.open(self.folder / "room", os.O_WRONLY | os.O_CREAT), fcntl.LOCK_SH)
        self.notify("go")

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        self.notify("wait")
        with self._flock("gate", fcntl.LOCK_EX), self._flock("room", fcntl.LOCK_EX):
            self.notify("go")
            yield


@dataclass
class Worker:
    task: Task
    proc: subprocess.Popen
    fd: int  # the read end of its message pipe
    log: Path
    used_s: float = 0.0  # seconds of work before the current stretch
    since: float | None = None  # when the current stretch of work began; None while waiting
    buffer: bytes = field(default=b"", repr=False)

    def busy_s(self, now: float) -> float:
        return self.used_s + (now - self.since if self.since is not None else 0.0)

    def note(self, what: str, now: float) -> None:
        if what == "wait" and self.since is not None:
            self.used_s, self.since = self.busy_s(now), None
        elif what == "go":
            self.since = now

    def messages(self) -> list[list]:
        """The messages that have arrived, without waiting for more."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.fd, 1 << 16):
                self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines]

    def stop(self, grace_s: float = 0.0) -> None:
        """Ends the worker and whatever it started (its session), after `grace_s` seconds to
        exit by itself (a finished row cleans up after itself)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def failed(task: Task, why: str, log: Path | None = None) -> dict[str, object]:
    row: dict[str, object] = {**asdict(task), "error": why}
    if log is not None and log.exists():
        row["log_tail"] = log.read_text(errors="replace")[-LOG_TAIL:]
    return row


def poll(w: Worker, now: float, timeout_s: float) -> dict[str, object] | None:
    """The worker's row if it has finished, died or run out of time (then it is stopped), else
    None."""
    for what, row in w.messages():
        if what == "row":
            return row
        w.note(what, now)
    if w.proc.poll() is not None:
        return failed(w.task, f"worker died (exit code {w.proc.returncode})", w.log)
    if w.busy_s(now) > timeout_s:
        w.stop()
        return failed(w.task, f"timed out after {timeout_s:g} s (--timeout)", w.log)
    return None


def run_rows(
    tasks: list[Task],
    jobs: int,
    timeout_s: float,
    deadline: float | None,
    done: Callable[[dict[str, object]], None],
) -> None:
    """Runs every task in its own process, `jobs` at a time, calling `done(row)` as each
    row ends. A row gets `timeout_s` seconds of work (waits for the timing lock not counted);
    at `deadline` (a `time.monotonic()` value) running rows are stopped and the rest not run."""
    queue = deque(enumerate(tasks))
    running: list[Worker] = []
    with tempfile.TemporaryDirectory(prefix="mind-models-") as tmp:
        try:
            while queue or running:
                if deadline is not None and time.monotonic() > deadline:
                    for w in running:
                        done(failed(w.task, f"stopped: {DEADLINE_REACHED}", w.log))
                    for _, task in queue:
                        done(failed(task, f"not run: {DEADLINE_REACHED}"))
                    return
                while queue and len(running) < jobs:
                    running.append(_start(*queue.popleft(), Path(tmp)))
                wait([w.fd for w in running], timeout=1.0)
                now = time.monotonic()
                for w in list(running):
                    row = poll(w, now, timeout_s)
                    if row is not None:
                        running.remove(w)
                        w.stop(grace_s=10.0)
                        done(row)
        finally:
            for w in running:
                w.stop()


def _start(index: int, task: Task, tmp: Path) -> Worker:
    folder = tmp / f"row{index}"
    folder.mkdir()
    log = folder / "log.txt"
    read, write = os.pipe()
    os.set_blocking(read, False)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.workers", json.dumps(asdict(task)), str(folder),
             str(write)],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            pass_fds=(write,), start_new_session=True,  # its own process group, to end it whole
        )  # fmt: skip
    os.close(write)
    return Worker(task, proc, read, log, since=time.monotonic())


def main(argv: list[str]) -> None:
    """One row in this process: caches fresh under FOLDER, torch imported under the shared lock
    (start-up is work a timing must not share the machine with), messages to FD."""
    task, folder, fd = json.loads(argv[0]), argv[1], int(argv[2])
    pipe = os.fdopen(fd, "w", buffering=1)

    def send(what: str, row: dict | None = None) -> None:
        pipe.write(json.dumps([what, row], default=str) + "\n")

    fresh_caches(os.path.join(folder, "caches"))
    lock = TimingLock(Path(folder).parent, notify=send)
    with lock.shared():
        from benchmarks.model_row import Task, run
    row = run(Task(**task), lock)
    lock.shared_until_exit()
    send("row", row)


if __name__ == "__main__":
    main(sys.argv[1:])
