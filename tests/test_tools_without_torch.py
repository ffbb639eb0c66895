"""The tools read, verify, transform, print and emit loops, scheduled and triton IR without
importing torch (or Triton): only the stages that run torch load it (issue 9)."""

import subprocess
import sys
from pathlib import Path

LIT = Path(__file__).resolve().parent.parent / "lit_tests"

#: runs the tools in one fresh interpreter, then fails if torch or triton got imported
SCRIPT = """
import contextlib, io, sys
from mind.tools import mind_opt, mind_translate

loops, scheduled, triton_ir = sys.argv[1:]
runs = [
    (mind_opt, [loops, "--split-input-file", "--pass=fuse"]),
    (mind_opt, [loops, "--split-input-file", "--pass=merge-loops", "--generic"]),
    (mind_opt, [scheduled, "--pass=to-triton", "-o", triton_ir]),
    (mind_opt, [triton_ir]),
    (mind_opt, ["--list-passes"]),
    (mind_translate, [triton_ir]),
    (mind_translate, [scheduled]),
    (mind_translate, [loops, "--to=dot"]),
    (mind_opt, [loops, "--split-input-file", "--pass=fuse", "--remarks"]),
]
for tool, argv in runs:
    with contextlib.redirect_stdout(io.StringIO()):
        assert tool.main(argv) == 0, argv
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "triton", "numpy"})
assert not loaded, f"loaded {loaded}"
"""


def test_tools_run_without_torch(tmp_path):
    args = [LIT / "fuse" / "fuse.loops", LIT / "triton" / "seed.scheduled", tmp_path / "x.triton"]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *map(str, args)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "x.triton").read_text().startswith("triton.kernel @")


def test_help_imports_nothing_heavy():
    code = (
        "import sys\nfrom mind.tools.mind_opt import build_parser\n"
        "assert not {m.split('.')[0] for m in sys.modules} & {'sympy', 'lark', 'torch'}"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
