"""The README's tool examples run as written, on the inputs that ship in examples/."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mind.target.dot import can_render

ROOT = Path(__file__).resolve().parent.parent


def tool_commands() -> list[str]:
    """The `mind-opt` / `mind-translate` lines of the README's Tools block, comments dropped."""
    readme = (ROOT / "README.md").read_text()
    tools = readme[readme.index("## Tools") :]
    block = re.search(r"```\n(.*?)```", tools, re.S).group(1)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith(("mind-opt", "mind-translate"))]


def executable(tool: str) -> list[str]:
    """The installed console script, or the module it runs."""
    script = Path(sys.executable).parent / tool
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", f"mind.tools.{tool.replace('-', '_')}"]


def test_the_readme_has_tool_examples():
    assert len(tool_commands()) >= 8


@pytest.mark.parametrize("command", tool_commands())
def test_readme_command_runs_as_written(command, tmp_path):
    if "--to=svg" in command or "--to=png" in command:
        if not can_render():
            pytest.skip("Graphviz (the graphviz package and the dot program) is not installed")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    tool, *args = shlex.split(command)
    result = subprocess.run(
        [*executable(tool), *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for i, arg in enumerate(args[:-1]):
        if arg == "-o":
            assert (tmp_path / args[i + 1]).stat().st_size > 0


def test_demo_prints_every_stage_and_matches_eager(capsys):
    """The README's first command ends in `python3 -m mind.demo`: every stage, the emitted
    Python, and the compiled result checked against eager."""
    from mind import demo

    demo.main()
    out = capsys.readouterr().out
    headers = re.findall(r"^(?://|#) ===== (\w+)", out, re.M)
    assert headers == ["fx", "aten", "loops", "scheduled", "triton", "emitted"]
    assert "@triton.jit" in out
    assert out.rstrip().endswith("matches eager")


def test_ci_runs_the_readme_set_up_commands_as_written():
    """`.ci/run` must run what a newcomer runs: the two commands of the README's Set up."""
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("## Set up") : readme.index("\n## ", readme.index("## Set up") + 1)]
    commands = [b.strip() for b in re.findall(r"```\n(.*?)```", setup, re.S)]
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert len(commands) == 2 and all(c in ci for c in commands), (commands, ci)
