"""Random programs compiled by mind give eager's results without falling back: a fixed-seed slice
of the differential fuzzer (`python3 -m mind.tools.program_fuzz`), and the programs it found
failing."""

from __future__ import annotations

import math

import pytest
import torch
from mind.tools import program_fuzz
from mind.tools.program_fuzz import Program


@pytest.mark.parametrize(
    "dynamic, train",
    [(False, False), (True, False), (False, True)],
    ids=["static", "dynamic", "train"],
)
def test_a_fixed_slice_of_programs_matches_eager(dynamic, train):
    results = {s: program_fuzz.check(s, dynamic, train) for s in range(5)}
    assert all(kind == "ok" for kind, _ in results.values()), results


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
@pytest.mark.parametrize("train", [False, True], ids=["infer", "train"])
def test_on_the_gpu_a_slice_of_programs_matches_eager(train):
    """Compiled Triton kernels, not the interpreter: C's integer division, real fp16/bf16
    arithmetic and CUDA eager's own kernels are what the CPU slice cannot see. ('invalid' too:
    program 2 trains through CUDA's aminmax, which eager cannot differentiate.)"""
    results = {s: program_fuzz.check(s, train=train, device="cuda") for s in range(20)}
    assert all(kind in ("ok", "invalid") for kind, _ in results.values()), results


def test_programs_are_data_drawn_from_the_seed():
    program = program_fuzz.generate(3)
    assert program == program_fuzz.generate(3) != program_fuzz.generate(4)
    assert 2 <= len(program.steps) <= 7
    assert all(name in program_fuzz.OPS for name, _, _ in program.steps)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_an_input_keeps_its_layout_in_the_copies_eager_and_mind_get(layout):
    (x,) = Program(((3, 4),), layout, ()).inputs(0)
    copy = program_fuzz._copy(x)
    assert not x.is_contiguous() and torch.equal(copy, x)
    assert (copy.stride(), copy.storage_offset()) == (x.stride(), x.storage_offset())
    assert copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    "wrong, found",
    [
        (lambda out: out + 1, "output 0: off by 1"),
        (lambda out: out + (out - out.detach()), "gradient of input "),  # grads doubled
        (lambda out: torch.cat([out, out]), "output 0: torch.float32[6, 4], eager"),
    ],
    ids=["output", "gradient", "size"],
)
def test_a_program_that_differs_from_eager_is_a_mismatch(wrong, found, monkeypatch):
    """The check can fail: a 'compiled' program whose outputs, or only whose gradients, are
    wrong is caught (a float program, so that it has gradients)."""
    _compiled_wrong(wrong, monkeypatch, backends=("mind",))
    kind, detail = program_fuzz.check(0, train=True)
    assert kind == "mismatch" and detail.startswith(found), detail


def test_a_difference_aot_eager_has_too_is_untraced(monkeypatch):
    """AOTAutograd's own trace differs from eager (torch 2.14's gradient of an unfold's
    overlapping windows, program 615376): mind's results are `aot_eager`'s, not mind's error."""
    _compiled_wrong(lambda out: out + 1, monkeypatch, backends=("mind", "aot_eager"))
    kind, detail = program_fuzz.check(0, train=True)
    assert kind == "untraced" and detail.startswith("aot_eager's results are mind's: output 0")


def _compiled_wrong(wrong, monkeypatch, backends: tuple[str, ...]) -> None:
    """`torch.compile` of a float program (which has gradients) under `backends` gives
    `wrong(out)` of each output; under the others, the program run as it is."""
    program = Program(((3, 4), (3, 4)), "dense", (("mul", (0, 1), ()), ("sin", (2,), ())))
    monkeypatch.setattr(program_fuzz, "generate", lambda seed: program)
    original = program_fuzz.run

    def compile(fn, backend="inductor", **kw):
        if backend not in backends:
            return original
        return lambda *a: tuple(wrong(out) for out in original(*a))

    monkeypatch.setattr(program_fuzz.torch, "compile", compile)


#: (program, dynamic, train): what the fuzzer found failing, each fixed
FOUND = {
    # x[:1] of a vector, returned: realize's view layout set p0 to the int 0 (fell back)
    "first_element": (Program(((3,),), "dense", (("half", (0,), (0,)),)), False, False),
    # x.repeat(2, 1, 1)[..., -1:], sizes symbolic: the index floor((p0*s0 + s0 - 1)/s0), which
    # sympy writes p0 + 1 + floor(-1/s0), went to Triton as `-1 // s0`: 0, not -1 (C's division)
    "last_of_repeat": (
        Program(((3, 1, 5),), "dense", (("repeat", (0,), ()), ("last", (1,), ()))),
        True,
        False,
    ),
    # a flip along a dim of size 1, returned, then its input written in place: the flip lowered
    # to a view of the input, so the output showed the input's new values (and aliased it)
    "flip_of_a_written_input": (
        Program(((2, 1, 3),), "dense", (("flip", (0,), (1,)),), mutates=True),
        False,
        False,
    ),
    # a view of an input's new value returned (AOTAutograd: `permute(x * -2 + 1)` after the
    # copy_ into x): realize copied it after the copy_, so it read the overwritten input, which
    # the verifier refused (fell back)
    "view_of_a_written_input": (
        Program(
            ((3, 3, 3),),
            "transposed",
            (("add", (0, 0), ()), ("transpose", (0,), ())),
            "bfloat16",
            True,
        ),
        True,
        False,
    ),
    # clamp(x, min=x[: max(1, s0 // 2)]), sizes symbolic, traced at 3 rows: the slice's rows,
    # Max(1, floor(s0/2)), broadcast (1 there, which Dynamo guards), but were read at p0
    "min_of_a_broadcast_slice": (
        Program(((3, 8),), "dense", (("half", (0,), (0,)), ("clamp_tensor", (0, 1), ()))),
        True,
        False,
    ),
    # a looped reduction's node reads an input after the max and overwrites it: the first r-loop
    # stored -2y + 1, which the second read (analysis/phases.py)
    "input_written_before_a_later_phase_reads_it": (
        Program(
            ((16,), (16,)),
            "dense",
            (
                ("rsqrt", (0,), ()),
                ("positive", (1,), ()),
                ("amax", (0,), (0, False)),
                ("stack", (0,), (0,)),
                ("sign", (0,), ()),
                ("logical", (4, 1), ()),
            ),
            "int64",
            True,
        ),
        True,
        False,
    ),
    # 0 ** 0: the interpreted pow, exp2(0 * log2(0)), gave NaN where C's gives 1
    "zero_to_the_zero": (
        Program(
            ((1031, 8, 1), (1031, 8, 1)),
            "transposed",
            (
                ("to_bf16", (1,), ()),
                ("pow_tensor", (1, 2), ()),
                ("add", (1, 2), ()),
                ("square", (4,), ()),
                ("floor_div", (3, 3), ()),
                ("max", (6,), (2, False)),
                ("remainder", (3,), ()),
            ),
            "int32",
        ),
        False,
        False,
    ),
    # erf(x).scatter_reduce(amax) in bf16, trained (erf(x) not an output): the backward
    # compares erf(x), recomputed, with the saved max; inline dropped erf's rounding to bf16, so
    # nothing tied, and the gradient, divided by the count of ties, was NaN (as Inductor's is)
    "compared_after_a_dropped_rounding": (
        Program(
            ((3,),),
            "dense",
            (("sum_all", (0,), ()), ("erf", (0,), ()), ("scatter_amax", (2,), (0,))),
            "bfloat16",
        ),
        False,
        True,
    ),
}


@pytest.mark.parametrize("name", FOUND)
def test_programs_the_fuzzer_found(name, monkeypatch):
    program, dynamic, train = FOUND[name]
    monkeypatch.setattr(program_fuzz, "generate", lambda seed: program)
    assert program_fuzz.check(0, dynamic, train) == ("ok", "")


def test_a_size_that_depends_on_values_may_be_f64_s_or_a_nudged_eager_s():
    """nonzero's count of `lgamma(|x| + 0.5) > 0` in f16 differs from eager's where |x| + 0.5
    is not rounded to f16 (program 613155): judged as values are, against the f64 program and
    eager on inputs moved by a rounding, whose sizes must then be the compiled one's."""
    got = torch.tensor([[1.0], [1025.0]], dtype=torch.float16)
    assert program_fuzz._is_about(got, torch.tensor([[1.0], [1025.0]], dtype=torch.float64))
    assert not program_fuzz._is_about(got, torch.tensor([[1.0]], dtype=torch.float64))
    assert not program_fuzz._is_about(got, torch.tensor([[1.0], [1040.0]], dtype=torch.float64))


def test_a_result_rounded_to_bf16_inside_the_program_is_judged_to_a_bf16_unit():
    """Program 621195 rounds the f32 cumsum of `atan2(x, x)` (x int64: nothing to nudge) to bf16
    and back: 113 pi, one f32 unit from -355, a bf16 tie, so a cumsum that adds in another order
    gives -356 where eager gives -354. The program's `to_bf16` makes that one bf16 unit its
    noise; a program without such a rounding keeps f32's tolerance."""
    program = Program(((8,),), "dense", (("atan2", (0, 0), ()), ("to_bf16", (1,), ())), "int64")
    assert program_fuzz._coarsest_rounding(program) == torch.finfo(torch.bfloat16).eps
    plain = Program(((8,),), "dense", (("atan2", (0, 0), ()),), "int64")
    assert program_fuzz._coarsest_rounding(plain) == 0.0  # (f32 results keep their own tolerance)
    want, got = [("output 0", torch.tensor([-354.0]))], [("output 0", torch.tensor([-356.0]))]

    def unmoved():  # eager's results on nudged inputs, and the f64 program's: integer inputs
        return want

    f32, bf16 = torch.finfo(torch.float32).eps, torch.finfo(torch.bfloat16).eps
    assert program_fuzz._difference(want, got, unmoved, unmoved, f32).startswith("output 0")
    assert program_fuzz._difference(want, got, unmoved, unmoved, bf16) is None


def test_closeness_to_float64_is_judged_on_finite_values():
    """A result holding NaN or inf (a program may make them) is still judged against float64:
    mind's floor of a bf16 `3 * x` at -5 (computed in f32) where eager's is -4 (3x rounded to
    -4.0 first) and float64's -5 is the closer, NaN beside it or not."""
    nan, inf = float("nan"), float("inf")
    exact = [("output 0", torch.tensor([-5.0, nan, inf], dtype=torch.float64))]
    eager = torch.tensor([-4.0, nan, inf]).bfloat16()
    assert program_fuzz._closer_to_exact(exact, 0, eager, torch.tensor([-5.0, nan, inf]).bfloat16())
    assert not program_fuzz._closer_to_exact(exact, 0, torch.tensor([-5.0, nan, inf]), eager)


def test_a_nan_where_eager_has_a_number_is_an_error_however_the_rest_agrees():
    """Only a NaN apart (mind's 0 ** 0 was NaN, eager's 1): no nudge of eager's inputs and no
    float64 run excuses it."""
    nan = float("nan")
    assert program_fuzz._error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, nan])) == math.inf
    assert program_fuzz._error(torch.tensor([1.0, nan]), torch.tensor([1.5, nan])) == 0.5


def test_a_program_dynamos_trace_refuses_is_untraced(monkeypatch):
    """Eager multiplies an empty int32 batch by an f32 one (nothing to compute); Dynamo's trace,
    before any backend, runs the meta function, which refuses the mix. Such a program is
    'untraced': not mind's to answer."""
    program = Program(
        ((1, 1, 17), (0, 1, 17)), "dense", (("sinh", (0,), ()), ("bmm", (1, 2), ())), "int32"
    )
    monkeypatch.setattr(program_fuzz, "generate", lambda seed: program)
    program_fuzz.run(program, *program.inputs(0))  # eager runs it
    kind, detail = program_fuzz.check(0)
    assert kind == "untraced", detail


def test_a_fallback_aot_eager_has_too_is_untraced(monkeypatch):
    """An empty input's mse_loss backward: AOTAutograd's trace runs its meta, torch's rule,
    which divides by the numel, 0; mind runs the graph eagerly, and `aot_eager` fails. Such a
    program is 'untraced' too."""
    program = Program(
        ((0, 5, 3),), "dense", (("tanh", (0,), ()), ("mse_loss", (1, 0), ())), "float32"
    )
    monkeypatch.setattr(program_fuzz, "generate", lambda seed: program)
    kind, detail = program_fuzz.check(0, train=True)
    assert kind == "untraced" and "aot_eager fails too" in detail, detail


def test_a_program_whose_backward_eager_refuses_is_invalid():
    """Generating runs the steps forward only: eager's adaptive_avg_pool2d backward refuses an
    empty channel dim that its forward accepts (program 710096). Such a program is 'invalid',
    not a crash of the fuzzer."""
    kind, detail = program_fuzz.check(710096, train=True)
    assert kind == "invalid" and "adaptive_avg_pool2d_backward" in detail, detail
