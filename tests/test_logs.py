"""mind's logs: MIND_LOGS channels, TORCH_LOGS=mind, and nothing logged where compiled code runs."""

from __future__ import annotations

import inspect
import logging
import os
import subprocess
import sys
import warnings

import pytest
import torch
from mind.ir import logs
from mind.runtime.cudagraphs import MindCudaGraphWarning
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
    assert "graph graph1_forward (from AOTAutograd's cache):\n" in capsys.readouterr().err
    torch._dynamo.reset()
    with torch._functorch.config.patch(enable_autograd_cache=False):
        torch.compile(seed, backend="mind")(*inputs)
    assert "graph graph2_forward (from the graph cache):\n" in capsys.readouterr().err


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
        "autotune",
    }


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_channels_say_what_bound_recorded_and_nothing_per_replay(all_logs, monkeypatch, capsys):
    """launch: each kernel bound once at load; cudagraphs: warm-up, then one recording; the
    replays after that log nothing."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.randn(64, 256, device="cuda")
    compiled = torch.compile(lambda x: x.softmax(-1) * 2, backend="mind", mode="reduce-overhead")
    for _ in range(2):  # warm-up, record
        compiled(x)
    err = capsys.readouterr().err
    assert "[mind.launch] kernel triton_" in err and ": bound" in err
    assert ": warm-up of shape 0" in err and ": recording 0 of this shape" in err
    for _ in range(3):
        torch.testing.assert_close(compiled(x), x.softmax(-1) * 2)
    assert "[mind." not in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graph_warning_points_at_the_callers_line(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    compiled = torch.compile(lambda x, s: x * s.cuda(), backend="mind", mode="reduce-overhead")
    x, s = torch.randn(8, device="cuda"), torch.tensor(3.0)  # a CPU input: not recordable
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            compiled(x, s)  # the line the warning names
            line = inspect.currentframe().f_lineno - 1
    warned = [w for w in caught if issubclass(w.category, MindCudaGraphWarning)]
    assert warned and all((w.filename, w.lineno) == (__file__, line) for w in warned)
