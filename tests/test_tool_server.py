"""The warm tool server (tools/server.py): a run it forks gives what a new process gives (output,
diagnostics, exit status, a file written relative to the working directory, standard input), and
a tool whose environment is not the server's, or that finds no server, runs in its own process."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOOPS = ROOT / "lit_tests" / "fuse" / "fuse.loops"
INVALID = ROOT / "lit_tests" / "loops" / "invalid.loops"
SCHEDULED = ROOT / "lit_tests" / "triton" / "seed.scheduled"
#: the exit status of a tool the server did not run
NOT_SERVED = 99
#: asks the server to run tool argv[1] on the rest of argv; NOT_SERVED where it did not
ASK = (
    "import sys\nfrom mind.tools.server import run_on_server\n"
    f"tool = sys.argv.pop(1)\ncode = run_on_server(tool)\nsys.exit({NOT_SERVED} if code is None else code)"
)
TOOLS = {"mind-opt": "mind.tools.mind_opt", "mind-translate": "mind.tools.mind_translate"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server's socket and the environment it runs tools in."""
    path = tmp_path_factory.mktemp("server") / "tools.sock"
    env = dict(os.environ, MIND_TOOL_SERVER=str(path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mind.tools.server", str(path)], env=env, stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), "the server did not start listening"
    yield path, env
    proc.terminate()
    proc.wait()


def served(env, tool, args, cwd, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ASK, tool, *map(str, args)],
        env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
    )  # fmt: skip


def fresh(tool, args, cwd, stdin=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MIND_TOOL_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", TOOLS[tool], *map(str, args)],
        env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
    )  # fmt: skip


RUNS = {
    "passes": ("mind-opt", [LOOPS, "--split-input-file", "--pass=fuse"], None),
    "diagnostics": ("mind-opt", [INVALID, "--split-input-file"], None),
    "verify": ("mind-opt", [INVALID, "--split-input-file", "--verify-diagnostics"], None),
    "stdin": ("mind-opt", ["-", "--pass=to-triton"], SCHEDULED.read_text()),
    "usage": ("mind-opt", [LOOPS, "--pass=nosuchpass"], None),
    "help": ("mind-translate", ["--help"], None),
    "translate": ("mind-translate", [SCHEDULED], None),
}


@pytest.mark.parametrize("name", RUNS)
def test_a_served_run_is_a_new_process_run(server, name, tmp_path):
    tool, args, stdin = RUNS[name]
    got = served(server[1], tool, args, tmp_path, stdin)
    want = fresh(tool, args, tmp_path, stdin)
    assert got.returncode != NOT_SERVED, got.stderr
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)


def test_a_served_run_writes_relative_to_its_directory(server, tmp_path):
    args = [SCHEDULED, "--pass=to-triton", "-o", "out.triton"]
    got = served(server[1], "mind-opt", args, tmp_path)
    assert (got.returncode, got.stdout, got.stderr) == (0, "", "")
    assert (tmp_path / "out.triton").read_text().startswith("triton.kernel @")


def test_another_environment_runs_in_its_own_process(server, tmp_path):
    env = dict(server[1], MIND_LOGS="fusion")
    assert served(env, "mind-opt", [SCHEDULED], tmp_path).returncode == NOT_SERVED
    run = subprocess.run(
        [sys.executable, "-m", "mind.tools.mind_opt", str(SCHEDULED)], env=env, capture_output=True
    )
    assert run.returncode == 0 and run.stdout.startswith(b"scheduled.graph")


def test_no_server_runs_in_its_own_process(tmp_path):
    env = dict(os.environ, MIND_TOOL_SERVER=str(tmp_path / "none.sock"))
    assert served(env, "mind-opt", [SCHEDULED], tmp_path).returncode == NOT_SERVED
