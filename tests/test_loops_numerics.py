"""Numerics of the loops dialect: every program is captured (fx, then to-aten), lowered (and, when
passes exist, realized and inlined), run by the reference evaluator, and compared with eager
PyTorch. A failure here means a lowering (or a later loops pass) computes the wrong numbers."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest
import torch
import torch.nn.functional as F
from mind.interpreters.loops import evaluate
from mind.ir.printer import print_module
from mind.passes import PASSES, run_pipeline
from torch.testing import assert_close

import mind


@dataclass(frozen=True)
class Program:
    id: str
    fn: Callable
    inputs: tuple


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


_G = _gen()


def f(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=_G).to(dtype)


def pos(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=_G) + 0.1


def i(*shape: int, high: int = 10, low: int = -10) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_G)


def b(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=_G) > 0.5


def _unary(name: str, fn: Callable, x: torch.Tensor | None = None) -> Program:
    return Program(name, fn, (f(4, 8) * 3 if x is None else x,))


PROGRAMS: list[Program] = [
    # -- unary math --
    _unary("exp", torch.exp),
    _unary("log", torch.log, pos(4, 8)),
    _unary("sqrt", torch.sqrt, pos(4, 8)),
    _unary("rsqrt", torch.rsqrt, pos(4, 8)),
    _unary("tanh", torch.tanh),
    _unary("sigmoid", torch.sigmoid),
    _unary("erf", torch.erf),
    _unary("abs_neg", lambda x: (x.abs(), -x)),
    _unary("relu", torch.relu),
    _unary("sin_cos", lambda x: (x.sin(), x.cos())),
    _unary("floor_ceil_round", lambda x: (x.floor(), x.ceil(), x.round())),
    _unary("sign_reciprocal", lambda x: (x.sign(), x.reciprocal())),
    # -- binary arithmetic, promotion, comparisons --
    Program("broadcast_scalars", lambda a, c: (a + c * 2.0, a - 1, 3 / a, a * c), (f(4, 8), f(8))),
    Program("div_floordiv_mod", lambda a, c: (a / c, a // c, a % c), (f(4, 8), pos(4, 8))),
    Program(
        "int_ops", lambda x, y: (x + 3, x * y, x // 3, x % 3, x - y), (i(4, 8), i(4, 8, low=1))
    ),
    Program(
        "int_float_promotion", lambda x, a: (x + a, x * 0.5, x / 2, x.float()), (i(4, 8), f(4, 8))
    ),
    Program(
        "int32_mixed",
        lambda x, y: (x + y, x * 2.5, x.to(torch.int32) // 4, (x > 0).sum(-1)),
        (i(4, 8).to(torch.int32), i(4, 8)),
    ),
    Program("int_truediv_int", lambda x, y: x / y, (i(4, 8), i(4, 8, low=1))),
    Program(
        "bool_ops", lambda p, q: (p & q, p | q, p ^ q, ~p, p.logical_and(q)), (b(4, 8), b(4, 8))
    ),
    Program("bool_arith", lambda p, a: (p + 1, a * p, p.sum()), (b(4, 8), f(4, 8))),
    Program(
        "comparisons",
        lambda a, c: (a > c, a <= 0, a == c, a != 0.5, torch.maximum(a, c), torch.minimum(a, c)),
        (f(4, 8), f(8)),
    ),
    Program("where", lambda a, c: torch.where(a > 0, a, c * 2), (f(4, 8), f(4, 8))),
    Program("where_scalar", lambda a: torch.where(a > 0, a, 0.0), (f(4, 8),)),
    Program(
        "clamp", lambda a: (a.clamp(-0.5, 0.5), a.clamp(min=0.1), a.clamp_max(0.2)), (f(4, 8),)
    ),
    Program(
        "pow", lambda a, c: (a.pow(2), a.pow(c), torch.pow(2.0, a), a**0.5), (pos(4, 8), f(4, 8))
    ),
    Program(
        "integer_powers",
        lambda a: (a.pow(1.0), a.pow(5), a.pow(-2.0), a.pow(0), a.pow(31.0), a.pow(32.0)),
        (f(4, 8),),
    ),
    Program(
        "bf16",
        lambda x, y: (x * y + 1, x.exp(), x > y),
        (f(4, 8, dtype=torch.bfloat16), f(4, 8, dtype=torch.bfloat16)),
    ),
    Program("f16", lambda x: (x.sigmoid() * 2, x.sum(-1)), (f(4, 8, dtype=torch.float16),)),
    Program(
        "bf16_to_f32",
        lambda x: x.float() * 3 + x.to(torch.float32),
        (f(4, 8, dtype=torch.bfloat16),),
    ),
    Program(
        "to_dtype",
        lambda a: (a.to(torch.int32), a.to(torch.bfloat16), (a > 0).to(torch.float16)),
        (f(4, 8) * 5,),
    ),
    # -- views --
    Program("view_reshape", lambda x: (x.view(8, 4) * 2, x.reshape(2, 16) + 1), (f(4, 8),)),
    Program("permute", lambda x: x.permute(2, 0, 1) * 2, (f(2, 3, 4),)),
    Program("transpose_t", lambda x: (x.transpose(0, 1) + 1, x.t().contiguous()), (f(4, 8),)),
    Program("expand", lambda x, c: x.expand(3, 4, 8) + c, (f(4, 1), f(3, 1, 8))),
    Program("slice_step", lambda x: (x[1:3, ::2] * 2, x[:, 5:] + 1, x[::3] - 1), (f(6, 8),)),
    Program("select", lambda x: (x[1] * 2, x[:, -1] + 1, x.select(2, 0) * 3), (f(4, 8, 2),)),
    Program("squeeze_unsqueeze", lambda x: (x.squeeze(1) * 2, x.unsqueeze(0) + 1), (f(4, 1, 8),)),
    Program("noncontiguous_input", lambda x: (x * 2, x.sum(0)), (f(8, 4).t(),)),
    Program(
        "chunk", lambda x: tuple(c * (k + 1) for k, c in enumerate(x.chunk(3, dim=1))), (f(4, 9),)
    ),
    Program(
        "views_mixed",
        lambda x: (
            x.view(8, 64).permute(1, 0).contiguous()
            + x.t().reshape(64, 8)[:, 1:7:2].sum()
            + x[1].view(64, 1)
        ),
        (f(8, 64),),
    ),
    # -- construction and copies --
    Program(
        "cat",
        lambda a, c: (torch.cat([a, c], dim=1), torch.cat([a, a * 2], dim=0)),
        (f(3, 2), f(3, 5)),
    ),
    Program("pad", lambda x: (F.pad(x, (1, 2)), F.pad(x, (0, 1, 2, 0), value=-1.0)), (f(3, 4),)),
    Program(
        "factories",
        lambda x: (
            x + torch.full((4, 8), 2.0),
            torch.zeros(3, 2) + x[0, 0],
            torch.ones(4, 1) * x,
            torch.arange(8) * x,
            torch.arange(2, 11, 3),
        ),
        (f(4, 8),),
    ),
    Program("clone", lambda x: x.clone() + x.t().clone().t(), (f(4, 8),)),
    # -- reductions --
    Program(
        "sum_dims",
        lambda x: (x.sum(-1), x.sum(0), x.sum(1, keepdim=True), x.sum((0, 2)), x.sum()),
        (f(3, 4, 5),),
    ),
    Program("mean", lambda x: (x.mean(-1, keepdim=True), x.mean((0, 1))), (f(3, 4, 5),)),
    Program(
        "amax_amin", lambda x: (x.amax(-1), x.amin(0, keepdim=True), x.amax((0, 2))), (f(3, 4, 5),)
    ),
    Program("prod", lambda x: (x.prod(-1), x.prod(1, keepdim=True)), (f(3, 4, 5) * 0.5 + 1,)),
    Program(
        "argmax_argmin",
        lambda x: (x.argmax(-1), x.argmin(1), x.argmax(0, keepdim=True), x.argmax()),
        (f(3, 4, 5),),
    ),
    Program("any_all", lambda p: (p.any(-1), p.all(0), p.any()), (b(3, 4),)),
    Program(
        "var_std",
        lambda x: (x.var(1), x.var(-1, correction=0, keepdim=True), x.std(0), x.std((0, 2))),
        (f(3, 4, 5),),
    ),
    Program("var_mean", lambda x: torch.var_mean(x, dim=-1), (f(4, 8),)),
    Program("int_sum", lambda x: (x.sum(-1), x.amax(0)), (i(4, 8),)),
    Program("bf16_sum", lambda x: (x.sum(-1), x.mean(0)), (f(4, 64, dtype=torch.bfloat16),)),
    # -- composites --
    Program(
        "softmax",
        lambda x: (torch.softmax(x, -1), torch.softmax(x, 0), F.log_softmax(x, -1)),
        (f(4, 8),),
    ),
    Program("layer_norm", lambda x, w, c: F.layer_norm(x, (8,), w, c), (f(4, 8), f(8), f(8))),
    Program("gelu", lambda x: (F.gelu(x), F.gelu(x, approximate="tanh")), (f(4, 8),)),
    Program("silu", F.silu, (f(4, 8),)),
    Program(
        "rms_norm",
        lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        (f(4, 8), f(8)),
    ),
    Program(
        "seed", lambda a, c, d: ((a + c) * d.relu()).sum(dim=-1), (f(4, 128), f(4, 128), f(4, 128))
    ),
    # -- indexing --
    Program(
        "embedding", lambda idx, w: F.embedding(idx, w) * 2, (i(2, 5, low=0, high=10), f(10, 4))
    ),
    Program("gather", lambda x, idx: torch.gather(x, 1, idx), (f(4, 8), i(4, 3, low=0, high=8))),
    Program("index", lambda x, idx: x[idx] + 1, (f(6, 4), torch.tensor([5, 0, 2, 2]))),
    Program("index_negative", lambda x, idx: x[idx] * 2, (f(6, 4), torch.tensor([-1, 0, -6]))),
    # -- ATen calls --
    Program("mm", lambda x, w: torch.mm(x, w) + 1, (f(4, 8), f(8, 3))),
    Program("bmm", torch.bmm, (f(2, 4, 8), f(2, 8, 3))),
    Program("addmm", lambda c, x, w: torch.addmm(c, x, w), (f(3), f(4, 8), f(8, 3))),
    Program(
        "linear",
        lambda x, w, c: F.gelu(F.linear(x, w, c), approximate="tanh"),
        (f(4, 8), f(3, 8), f(3)),
    ),
    Program(
        "conv2d", lambda x, w: F.conv2d(x, w, padding=1).relu(), (f(1, 2, 6, 6), f(3, 2, 3, 3))
    ),
    Program("sort", lambda x: torch.sort(x, dim=-1), (f(4, 8),)),
    Program("cumsum", lambda x: x.cumsum(1) * 2, (f(4, 8),)),
    Program("topk", lambda x: torch.topk(x * 2, 3), (f(4, 8),)),
    # -- graph shape --
    Program(
        "multiple_outputs", lambda a, c: (a + c, a * c, (a - c).amax(dim=0)), (f(4, 8), f(4, 8))
    ),
    Program("tensor_constant", lambda x: x + torch.tensor([1.0, 2.0, 3.0]), (f(4, 3),)),
]

PIPELINES = ["lower", "lower,realize,inline"]


#: Dynamo names a graph input after the argument it reads; graph inputs come in first-use order
_PLACEHOLDER = re.compile(r"L_xs_(\d+)_")


@cache
def _captured(program_id: str) -> tuple[str, tuple[int, ...]]:
    """The program's fx IR as text (each pipeline parses its own copy) and, for each graph input,
    the index of the program input it reads."""
    program = next(p for p in PROGRAMS if p.id == program_id)
    module = mind.capture(lambda *xs: program.fn(*xs), *program.inputs)
    assert len(module.ops) == 1, f"{program_id} captured {len(module.ops)} graphs"
    placeholders = [op for op in module.ops[0].body.ops if op.name == "fx.placeholder"]
    order = tuple(int(_PLACEHOLDER.fullmatch(op.symbol).group(1)) for op in placeholders)
    return print_module(module), order


def _flatten(out: object) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _check(program: Program, pipeline: str) -> None:
    captured, order = _captured(program.id)
    module = run_pipeline(mind.parse(captured), pipeline)
    text = print_module(module)
    assert print_module(mind.parse(text)) == text, "the lowered IR does not round-trip"
    got = evaluate(module.ops[0], [program.inputs[k] for k in order])
    want = _flatten(program.fn(*program.inputs))
    assert len(got) == len(want), f"{len(got)} outputs, eager gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        tol = {"rtol": 1e-5, "atol": 1e-5} if w.dtype == torch.float32 else {}
        assert_close(g, w, **tol, equal_nan=True, msg=lambda m, k=k: f"output {k}: {m}")


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_numerics(program: Program, pipeline: str) -> None:
    missing = [p for p in pipeline.split(",") if p not in PASSES]
    if missing:
        pytest.skip(f"pass {', '.join(missing)} not registered yet")
    _check(program, pipeline)
