"""mind's logs: MIND_LOGS channels, TORCH_LOGS=mind, and nothing logged where compiled code runs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch
from mind.ir import logs
from test_runtime import seed

import mind

pytestmark = pytest.mark.usefixtures("isolated_runtime")


@pytest.fixture
def all_logs():
    mind.set_logs("all")
    yield
    mind.set_logs("")


#: a row sum fused with its epilogue, refused with a [4, 64] consumer (no shared loop nest)
FUSED_AND_NOT = lambda x, y: x.softmax(-1).sum(-1, keepdim=True) * y  # noqa: E731


def seed_inputs():
    return tuple(torch.randn(4, 128) for _ in range(3))


def test_each_channel_says_what_the_compiler_did(all_logs, capsys):
    inputs = seed_inputs()
    torch.testing.assert_close(torch.compile(seed, backend="mind")(*inputs), seed(*inputs))
    err = capsys.readouterr().err
    for line in (
        "[mind.passes] lower: ",  # each pass, its time and the ops it left
        "[mind.passes] fuse: ",
        "[mind.output_code] graph graph0_forward (generated):\n",
        "def call(args):",
        "[mind.cache] graph ",
        ": miss\n",
        "[mind.launch] kernel triton_",
    ):
        assert line in err, line
    torch._dynamo.reset()
    torch.compile(seed, backend="mind")(*inputs)
    assert "(from the graph cache)" in capsys.readouterr().err


def test_fusion_log_carries_the_remarks(all_logs, capsys):
    torch.compile(FUSED_AND_NOT, backend="mind")(torch.randn(4, 128), torch.randn(4, 64))
    fusion = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[mind.fusion]")]
    assert fusion and all(
        x.startswith("[mind.fusion] @graph0_forward: remark: @op") for x in fusion
    )
    assert any(": fused into @op" in x for x in fusion)
    assert any(": not fused (iteration): " in x for x in fusion)


def test_channels_off_leave_loggers_as_configured():
    log = logging.getLogger("mind.fusion")
    mind.set_logs("fusion")
    assert log.level == logging.DEBUG and not log.propagate
    mind.set_logs("")
    assert log.level == logging.NOTSET and log.propagate and not log.handlers
    with pytest.raises(ValueError, match="unknown channel 'fusoin'"):
        mind.set_logs("fusoin")


def test_compiled_calls_log_nothing_and_check_nothing(all_logs, monkeypatch, capsys):
    """Every channel on: the calls after the first log nothing, and do not even ask a logger."""
    inputs = seed_inputs()
    compiled = torch.compile(seed, backend="mind")
    compiled(*inputs)
    capsys.readouterr()
    asked = []
    real = logging.Logger.isEnabledFor
    monkeypatch.setattr(
        logging.Logger,
        "isEnabledFor",
        lambda self, level: asked.append(self.name) or real(self, level),
    )
    for _ in range(3):
        compiled(*inputs)
    assert [n for n in asked if n.startswith("mind")] == []
    assert "[mind." not in capsys.readouterr().err


def test_torch_logs_shows_mind(tmp_path):
    """TORCH_LOGS takes module names, and mind is one: INFO for `mind`, DEBUG for `+mind`."""
    code = (
        "import torch\n"
        "f = torch.compile(lambda x, y: x.softmax(-1).sum(-1, keepdim=True) * y, backend='mind')\n"
        "f(torch.randn(4, 128), torch.randn(4, 64))\n"
    )
    env = dict(os.environ)
    env.pop("MIND_LOGS", None)
    seen = {}
    for setting in ("mind", "+mind"):
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "TORCH_LOGS": setting, "MIND_CACHE_DIR": str(tmp_path / setting)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        seen[setting] = result.stderr
    assert "lower: " in seen["mind"] and "fused into @" in seen["mind"]
    assert "not fused (" not in seen["mind"] and "not fused (" in seen["+mind"]
    assert "def call(args):" in seen["mind"]


def test_channels_are_documented():
    assert set(logs.CHANNELS) == {
        "passes",
        "fusion",
        "output_code",
        "cache",
        "launch",
        "cudagraphs",
    }
