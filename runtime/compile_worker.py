"""A compile worker: `python -m mind.runtime.compile_worker`, started by the compile pool."""

import sys

from mind.runtime.compile_pool import serve

if __name__ == "__main__":
    results = sys.stdout.buffer
    sys.stdout = sys.stderr  # what a compile prints must not corrupt the answers
    serve(sys.stdin.buffer, results)
