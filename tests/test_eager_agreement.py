"""Programs that once compiled to a wrong answer or fell back where nothing should fail: each is
compiled strictly (no fallback) and compared with eager, NaN included."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from programs import compile_strictly, no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")

NAN_ROW = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 2.0, -1.0]])


def _long_rows() -> torch.Tensor:
    x = torch.randn(2, 5000)  # looped reduction: the NaN arrives in a later block
    x[0, 3001] = float("nan")
    return x


CASES = {
    # max/min reductions propagate NaN (tl.max/tl.min drop it)
    "amax_nan": (lambda x: x.amax(-1), lambda: (NAN_ROW,)),
    "amin_nan": (lambda x: x.amin(-1), lambda: (NAN_ROW,)),
    "max_all_nan": (lambda x: x.max(), lambda: (NAN_ROW,)),
    "max_dim_nan": (lambda x: torch.max(x, -1), lambda: (NAN_ROW,)),
    "amax_looped_nan": (lambda x: x.amax(-1), lambda: (_long_rows(),)),
    "amin_looped_nan": (lambda x: x.amin(-1), lambda: (_long_rows(),)),
    # nothing to reduce: a 0-d input, size-1 dims (index 0, the value itself)
    "argmax_0d": (lambda x: x.argmax(), lambda: (torch.tensor(3.5),)),
    "argmin_0d": (lambda x: x.argmin(), lambda: (torch.tensor(3.5),)),
    "max_dim_0d": (lambda x: torch.max(x, 0), lambda: (torch.tensor(3.5),)),
    "argmax_one_element": (lambda x: x.argmax(), lambda: (torch.tensor([3.5]),)),
    "sum_size_one_dim": (lambda x: x.sum(-1), lambda: (torch.randn(3, 1),)),
    "rms_norm_size_one_rows": (
        lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5),
        lambda: (torch.randn(3, 1),),
    ),
    "int_sum_size_one_dim": (lambda x: x.sum(0), lambda: (torch.arange(4).view(1, 4),)),
    # any/all of one element through the logical accumulator: any of a uint8 5 is 1, not 5
    "any_all_of_one_uint8": (
        lambda x, y: (x.any(), x.all(), y.any(1), y.all(1)),
        lambda: (torch.tensor(5, dtype=torch.uint8), torch.tensor([[3], [0]], dtype=torch.uint8)),
    ),
    # 0-d inputs: a scalar load mixed with blocks
    "heaviside_0d": (torch.heaviside, lambda: (torch.tensor(0.0), torch.tensor(0.5))),
    "logaddexp_0d": (torch.logaddexp, lambda: (torch.tensor(0.3), torch.tensor(-1.2))),
    "isclose_0d": (torch.isclose, lambda: (torch.tensor(1.0), torch.tensor(1.0 + 1e-9))),
    "index_select_0d": (
        lambda x, i: torch.index_select(x, 0, i),
        lambda: (torch.tensor(5.0), torch.tensor([0])),
    ),
    # reductions over no element give the identity (sum 0, prod 1, any false, all true)
    "sum_over_empty_dim": (lambda x: x.sum(1), lambda: (torch.randn(4, 0),)),
    "prod_any_all_over_empty_dim": (
        lambda x: (x.prod(0), x.any(0), x.all(0)),
        lambda: (torch.randn(0, 3),),
    ),
    "mean_over_empty_dim": (lambda x: x.mean(1), lambda: (torch.randn(4, 0),)),
    # no degrees of freedom left (a float correction too): NaN, not -0
    "var_std_no_degrees_of_freedom": (
        lambda x, y: (x.std(0), y.std(0, correction=2), y.var(1, correction=3.0)),
        lambda: (torch.randn(0, 3), torch.randn(1, 3)),
    ),
    "vecdot_empty": (torch.linalg.vecdot, lambda: (torch.randn(3, 0), torch.randn(3, 0))),
    # an overload the packet's lowering does not take (`round.decimals`) is an ATen call
    "round_decimals": (lambda x: torch.round(x, decimals=2), lambda: (torch.randn(6) * 10,)),
    # effect tokens (with_effects around _linalg_check_errors) live inside the graph
    "linalg_inv": (torch.linalg.inv, lambda: (torch.randn(4, 4) + 4 * torch.eye(4),)),
    "linalg_solve": (
        torch.linalg.solve,
        lambda: (torch.randn(3, 3) + 3 * torch.eye(3), torch.randn(3)),
    ),
    "linalg_cholesky": (
        lambda a: torch.linalg.cholesky(a @ a.mT + torch.eye(3)),
        lambda: (torch.randn(3, 3),),
    ),
    # Triton's pow takes floats: integer powers by multiplications, or in ATen, as Inductor
    "int_pow": (
        lambda a, b: (a**b, a**0, a**7, 2**b, a.to(torch.uint8) ** 5, a**2.5, a.float() ** b),
        lambda: (torch.arange(-4, 4), torch.arange(8) % 5),
    ),
    # a float remainder is C's fmod (exact) made to take the divisor's sign, as eager's kernel:
    # `a - b * floor(a / b)` was 0 for 7 % 0.7 and off by up to b past a / b = 2**24
    "remainder_float": (
        lambda x: (x % 0.7, x % -3.0, torch.fmod(x, 0.7)),
        lambda: (torch.tensor([7.0, 1e8, -1e8, 3.5, -3.5, 2.1, 0.0, 12345.678]),),
    ),
    # fmod and remainder read a number in the tensor's dtype (CPU and CUDA kernels alike): a
    # bf16 remainder by 0.7 divides by 0.69921875, so 1.3984375 % 0.7 is 0 and not 0.69921875
    **{
        f"remainder_by_a_number_{d}": (
            lambda x: (x % 0.7, torch.fmod(x, -0.7), x % 257),
            lambda d=d: (torch.tensor([1.3984375, 2.09375, -1.3984375, 5.0, 7.0, 300.0]).to(d),),
        )
        for d in (torch.bfloat16, torch.float16)
    },
    # torch's reference rule refuses what eager takes ("cannot be safely cast"): the op is kept
    # undecomposed and runs in ATen, where eager truncates the value to 0
    "addcmul_int_by_a_float_value": (
        lambda x: torch.addcmul(x, x, x, value=0.5) * 2,
        lambda: (torch.tensor([1, 2, 3, -4]),),
    ),
    # torch's rule for _adaptive_avg_pool2d calls avg_pool2d, whose check refuses a 3-d input
    # with no channels (only a batch may be empty), which the op itself takes: the op is kept
    "adaptive_avg_pool_no_channels": (
        lambda x, y: (F.adaptive_avg_pool1d(x, 3), F.adaptive_avg_pool2d(y, (2, 3))),
        lambda: (torch.randn(2, 0, 33), torch.randn(0, 8, 9)),
    ),
    # a scalar operand wraps around into the tensor's integer dtype, as eager converts it
    "int_scalar_wraps": (
        lambda x: (
            x.to(torch.int8) * 200,
            x.to(torch.uint8) - 300,
            x + 2**33,
            x.to(torch.int8) + 300,
        ),
        lambda: (torch.arange(-3, 5, dtype=torch.int32),),
    ),
    # the wider unsigned dtypes are Triton's too (eager has few kernels for them)
    **{
        f"unsigned_{d}": (
            lambda x: (x * 3, x & 3, x.sum(), x.float() * 2, (x.long() * 2).to(x.dtype)),
            lambda d=d: (torch.tensor([0, 1, 7, 250, 60000]).to(getattr(torch, d)),),
        )
        for d in ("uint16", "uint32", "uint64")
    },
    # the CPU flash-attention op returns the logsumexp, not the attention weights
    "sdpa_flash_cpu": (
        lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v),
        lambda: tuple(torch.randn(1, 2, 4, 8) for _ in range(3)),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_eager(name):
    fn, make = CASES[name]
    inputs = make()
    torch.testing.assert_close(compile_strictly(fn, *inputs), fn(*inputs), equal_nan=True)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_conv_batch_norm_net(mode):
    """Eval mode traces to the in-place `_native_batch_norm_legit`, which AOTAutograd refused:
    batch norm decomposes to functional ATen by torch's own rules, running stats included."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    ref = copy.deepcopy(net)
    getattr(net, mode)(), getattr(ref, mode)()
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(compile_strictly(net, x), ref(x))
    torch.testing.assert_close(net[1].running_mean, ref[1].running_mean)
    torch.testing.assert_close(net[1].running_var, ref[1].running_var)


def test_an_input_overwritten_after_a_later_phase_reads_it():
    """One looped kernel reads y in its second r-loop (after x's max) and overwrites y: the
    store waits for that loop (analysis/phases.py), where the first loop had stored -2y + 1
    before the second read it (the program fuzzer's program 594049)."""

    def fn(x, y):
        out = (y - x.amax()).exp()
        y.mul_(-2).add_(1)
        return out

    x, y = torch.randn(5000), torch.randn(5000)
    want_y = y.clone()
    want = fn(x, want_y)
    torch.testing.assert_close(compile_strictly(fn, x, y), want)
    torch.testing.assert_close(y, want_y)


RAISES = {
    # an index out of range: the kernel asserts (Inductor's indirect-index assert), and the
    # call whose check fails reruns eagerly, which raises its own IndexError
    "embedding_out_of_range": (
        lambda i, w: F.embedding(i, w),
        lambda: (torch.tensor([0, 12]), torch.randn(10, 4)),
        lambda: (torch.tensor([0, 9]), torch.randn(10, 4)),
        IndexError,
    ),
    "index_select_out_of_range": (
        lambda x, i: x.index_select(0, i),
        lambda: (torch.randn(5, 3), torch.tensor([1, 5])),
        lambda: (torch.randn(5, 3), torch.tensor([1, 4])),
        IndexError,
    ),
    # integer division by zero raises on CPU ("ZeroDivisionError"), as Inductor's CPU code does
    "floordiv_by_zero": (
        lambda a, b: a // b,
        lambda: (torch.tensor([5, 6]), torch.tensor([0, 2])),
        lambda: (torch.tensor([5, -6]), torch.tensor([3, 4])),
        RuntimeError,
    ),
    "remainder_by_zero": (
        lambda a, b: a % b,
        lambda: (torch.tensor([5, 6]), torch.tensor([2, 0])),
        lambda: (torch.tensor([5, -6]), torch.tensor([3, 4])),
        RuntimeError,
    ),
}


@pytest.mark.parametrize("name", RAISES)
def test_raises_where_eager_raises(name):
    """Eager's own error at each call whose inputs fail a kernel's check, first or later, and
    the graph stays compiled: no fallback, and the right answer for the inputs in between."""
    fn, bad, good, error = RAISES[name]
    with pytest.raises(error):
        fn(*bad())
    compiled = torch.compile(fn, backend="mind")
    with no_fallback():
        with pytest.raises(error):
            compiled(*bad())
        inputs = good()
        torch.testing.assert_close(compiled(*inputs), fn(*inputs))
        with pytest.raises(error):
            compiled(*bad())


def test_a_negative_integer_power_raises_as_eager_does():
    """An ATen call in the compiled program: it raises eager's own error at each call."""
    compiled = torch.compile(lambda a: a**-2, backend="mind")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="negative integer powers"):
            compiled(torch.arange(1, 4))


def test_kernels_assert_only_what_eager_checks(tmp_path, monkeypatch):
    """The gather kernel asserts its bounds and compiles with debug; a float division does not."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    fn = lambda i, w, x: (F.embedding(i, w), x / (x - x))  # noqa: E731
    compile_strictly(fn, torch.tensor([1, 2]), torch.randn(10, 4), torch.randn(3))
    (source,) = [p.read_text() for p in tmp_path.glob("*.py")]
    assert source.count("tl.device_assert(") == 1 and "'index out of bounds'" in source
    assert source.count("@triton.jit(debug=True)") == 1


def test_singular_matrix_raises_as_eager_does_on_every_call():
    """The generated code runs `_linalg_check_errors` itself: a later call raises it too."""
    compiled = torch.compile(torch.linalg.inv, backend="mind")
    torch.testing.assert_close(compiled(torch.eye(3) * 2), torch.eye(3) / 2)
    with pytest.raises(torch.linalg.LinAlgError):
        compiled(torch.zeros(3, 3))


def test_an_output_eager_makes_fresh_shares_no_memory_with_the_input():
    """A flip along a dim of size 1 lowers to a view that reads its input unchanged; returned,
    it is copied (AOTAutograd takes it for fresh: a later write to the input must not show in
    it), while a permute, a view in eager too, still aliases the input."""
    x = torch.randn(2, 1, 3)
    flipped, permuted = compile_strictly(lambda x: (x.flip(1), x.permute(2, 0, 1)), x)
    storage = x.untyped_storage().data_ptr()
    assert flipped.untyped_storage().data_ptr() != storage
    assert permuted.untyped_storage().data_ptr() == storage
    x.add_(1)
    torch.testing.assert_close(flipped + 1, x)
