"""Runs the lit suite from pytest, so the one test command covers everything."""

import os
import subprocess
import sys
from pathlib import Path

LIT_DIR = Path(__file__).resolve().parent.parent / "lit_tests"


def test_lit_suite():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    jobs = str(max(2, os.cpu_count() or 2))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lit.main import main; main()",
            "-sv",
            "-j",
            jobs,
            str(LIT_DIR),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
