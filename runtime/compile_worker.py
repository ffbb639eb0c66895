"""The compile pool's server: `python -m mind.runtime.compile_worker FD...`, started by the pool
with a pair of pipe descriptors (jobs in, results out) per worker. It imports what compiling
needs once, warms up what every process would otherwise redo on its first kernel, then forks one
worker per pair (runtime/compile_pool.py) and waits for them. It never imports torch
(runtime/compile_job.py): it is ready in about half a second."""

import os
import sys


def warm_up() -> None:
    """Import and compute, before forking, what each worker's first compile would: Triton's
    compiler and its key (a hash of Triton's whole install, half a second), the modules the
    generated kernels import."""
    import contextlib
    import importlib

    from mind.runtime.compile_job import block_torch

    block_torch()
    import mind.runtime.triton_helpers  # noqa: F401
    import triton.compiler  # noqa: F401
    from triton.runtime.cache import triton_key

    triton_key()
    with contextlib.suppress(ImportError):  # what Triton's argument specialization imports
        importlib.import_module("triton.experimental.gluon.language")


def main(fds: list[int]) -> None:
    os.dup2(2, 1)  # what a compile prints goes to stderr
    warm_up()
    from mind.runtime.compile_job import serve

    children = []
    for jobs, results in zip(fds[::2], fds[1::2]):
        pid = os.fork()
        if pid == 0:
            for fd in fds:
                if fd not in (jobs, results):
                    os.close(fd)
            code = 0
            try:
                serve(os.fdopen(jobs, "rb"), os.fdopen(results, "wb"))
            except BaseException:
                code = 1
            os._exit(code)  # not the server's exit handlers
        children.append(pid)
    for fd in fds:
        os.close(fd)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main([int(fd) for fd in sys.argv[1:]])
