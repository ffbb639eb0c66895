"""Op families Inductor generates kernels for, that mind ran as ATen calls before: activations and
pointwise (leaky_relu, elu, selu, fmax, fmin, lcm, round with decimals, ldexp, angle, nextafter,
frexp, and the special functions with a libdevice form: i0, i1, Bessel j0 j1 y0 y1, erfcx, erfinv),
pooling (max, over small windows and large, average, adaptive; average and max backward), indexing
and creation (flip, rot90, roll, repeat, tril_indices, linspace, eye, arange of bools), scatters
into slices, diagonals and strided views, masked_scatter, take, addmv, bucketize and searchsorted
(binary searches), copies, unfold and fold, grid_sample. Each runs through mind's own kernels, with
no fallback, against eager: several shapes (odd sizes, strided inputs), dtypes (f32, bf16, ints)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from programs import CUDA, no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def compiled(fn, *args, tmp_path, monkeypatch):
    """`fn(*args)` compiled by mind (no fallback allowed) and the source of every module it
    generated."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        out = torch.compile(fn, backend="mind")(*args)
    return out, "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))


def _randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def _strided(*shape):
    """A non-contiguous input: every other column of a wider tensor."""
    return torch.randn(*shape[:-1], 2 * shape[-1])[..., ::2]


def _special_points(dtype=torch.float32):
    """Random values over several periods, and signed zeros, infinities, NaN, points near 1."""
    points = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 0.5, -0.999])
    return torch.cat([torch.randn(40) * 4, points]).to(dtype)


def _ints(*shape, dtype=torch.int64):
    return torch.randint(-50, 50, shape, dtype=dtype)


def _with_nans(x, *positions):
    for p in positions:
        x[p] = float("nan")
    return x


def _nonzero_ints(*shape):
    return torch.randint(1, 40, shape) * torch.where(torch.rand(shape) < 0.5, -1, 1)


#: name -> (fn, inputs); every case must run in mind's own kernels only
CASES = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda: (_randn(7, 13),)),
    "leaky_relu_bf16": (F.leaky_relu, lambda: (_randn(5, 9, dtype=torch.bfloat16),)),
    "elu": (lambda x: F.elu(x, alpha=0.7), lambda: (_strided(6, 11),)),
    "selu": (F.selu, lambda: (_randn(3, 5, 7),)),
    "celu_bf16": (lambda x: F.celu(x, 1.5), lambda: (_randn(17, dtype=torch.bfloat16),)),
    "fmax_nan": (
        torch.fmax,
        lambda: (
            torch.tensor([1.0, float("nan"), 3.0, float("nan")]),
            torch.tensor([2.0, 0.0, float("nan"), float("nan")]),
        ),
    ),
    "fmin_broadcast": (torch.fmin, lambda: (_randn(4, 1), _randn(1, 9))),
    "nextafter_bf16": (
        torch.nextafter,
        lambda: (_randn(6, 7, dtype=torch.bfloat16), _randn(6, 7, dtype=torch.bfloat16)),
    ),
    "frexp_strided": (torch.frexp, lambda: (_strided(5, 7) * 1e3,)),
    "frexp_fused_with_consumers": (  # both parts in one kernel with what reads them
        lambda x: (lambda m, e: m * e + e)(*torch.frexp(x * 3)),
        lambda: (_randn(6, 9),),
    ),
    **{  # the special functions with a libdevice form (Inductor's Triton set)
        f"special_{fn.__name__.removeprefix('special_')}": (fn, lambda: (_special_points(),))
        for fn in (
            torch.i0,
            torch.special.i1,
            torch.special.modified_bessel_i0,
            torch.special.modified_bessel_i1,
            torch.special.bessel_j0,
            torch.special.bessel_j1,
            torch.special.bessel_y0,
            torch.special.bessel_y1,
            torch.special.erfcx,
            torch.erfinv,
        )
    },
    "special_i0_bf16_strided": (torch.i0, lambda: (_strided(6, 7).to(torch.bfloat16) * 4,)),
    "special_bessel_j0_f64_fused": (
        lambda x: torch.special.bessel_j0(x) * torch.special.bessel_y1(x.abs()),
        lambda: (_special_points(torch.float64),),
    ),
    "special_erfinv_of_ints": (lambda x: torch.erfinv(x), lambda: (torch.tensor([-1, 0, 1, 2]),)),
    "masked_scatter": (
        torch.masked_scatter,
        lambda: (_randn(4, 5), torch.rand(4, 5) > 0.5, _randn(30)),
    ),
    "masked_scatter_broadcast_mask_int": (
        torch.masked_scatter,
        lambda: (_ints(3, 1, 5), torch.rand(4, 5) > 0.3, _ints(60)),
    ),
    "masked_scatter_long_strided": (  # the running count scans 19200 elements
        torch.masked_scatter,
        lambda: (_randn(300, 64).t(), torch.rand(64, 300) > 0.5, _randn(20000)),
    ),
    "masked_scatter_nothing_set": (
        torch.masked_scatter,
        lambda: (_randn(6), torch.zeros(6, dtype=torch.bool), _randn(0)),
    ),
    "bitwise_not_and_sign_of_unsigned_and_bools": (  # ~ of a uint8 and sign of a bool failed
        lambda x, b: (torch.bitwise_not(x), torch.bitwise_not(b), torch.sign(b), torch.sgn(x)),
        lambda: (torch.tensor([0, 1, 127, 128, 200, 255], dtype=torch.uint8), torch.rand(6) > 0.5),
    ),
    "arange_of_bools": (  # torch counts bools as 0 and 1 (OpInfo's arange, sample 6)
        lambda x: x + torch.arange(False, True, True, dtype=x.dtype),
        lambda: (_randn(3),),
    ),
    "take_0d_index": (  # torch's rule reads a 0-d index as a number: tracing stopped there
        torch.take,
        lambda: (_randn(3, 4), torch.tensor(-2)),
    ),
    "take_index_shape_strided": (
        torch.take,
        lambda: (_randn(5, 6).t(), torch.tensor([[0, 29], [-1, 7]])),
    ),
    "addmv": (
        lambda b, a, v: torch.addmv(b, a, v, beta=0.5, alpha=2),
        lambda: (_randn(5), _randn(5, 10), _strided(10)),
    ),
    "bucketize_nan_and_ties": (  # eager's comparisons: a NaN goes past the last boundary
        lambda x, b: (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True)),
        lambda: (
            torch.tensor([[float("nan"), 1.0, 1.5, -3.0], [4.0, 9.0, 0.5, 2.5]]),
            torch.tensor([0.5, 1.5, 1.5, 2.5, 4.0]),
        ),
    ),
    "bucketize_ints_in_floats": (
        torch.bucketize,
        lambda: (_ints(5, 7), torch.linspace(-60, 60, 13)),
    ),
    "searchsorted_rows_sorter": (  # each row searched in its own row, through the sorter
        lambda s, v, o: torch.searchsorted(s, v, side="right", sorter=o),
        lambda: (lambda s: (s, _randn(3, 5), s.argsort(-1)))(_randn(3, 9)),
    ),
    "searchsorted_long_bf16": (
        torch.searchsorted,
        lambda: (torch.sort(_randn(1000))[0].bfloat16(), _randn(4, 6).bfloat16()),
    ),
    "round_decimals": (lambda x: torch.round(x * 100, decimals=2), lambda: (_randn(9, 7),)),
    "round_neg_decimals": (lambda x: torch.round(x * 1e4, decimals=-3), lambda: (_randn(31),)),
    "flip": (lambda x: torch.flip(x, (0, 2)), lambda: (_randn(3, 4, 5),)),
    "flip_int_strided": (lambda x: x.flip(-1), lambda: (_ints(6, 10)[:, ::3],)),
    "fliplr_bf16": (torch.fliplr, lambda: (_randn(5, 7, dtype=torch.bfloat16),)),
    "rot90": (lambda x: torch.rot90(x, 1, (0, 1)), lambda: (_randn(5, 3),)),
    "rot90_twice": (
        lambda x: torch.rot90(x, 2, (1, 2)),
        lambda: (_ints(2, 3, 4, dtype=torch.int32),),
    ),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda: (_randn(3, 5),)),
    "tile_int": (lambda x: torch.tile(x, (3, 2)), lambda: (_ints(4, 3),)),
    "pad_circular": (
        lambda x: F.pad(x, (1, 2, 2, 0), mode="circular"),
        lambda: (_randn(2, 3, 4, 5),),
    ),
    "slice_scatter_int": (
        lambda x, y: torch.slice_scatter(x, y, 1, 1, 7, 2),
        lambda: (_ints(4, 9), _ints(4, 3)),
    ),
    "slice_scatter_negative_start": (
        lambda x, y: torch.slice_scatter(x, y, 0, -5, None, 2),
        lambda: (_strided(7, 3), _randn(3, 3)),
    ),
    "diagonal_scatter": (
        lambda x, y: torch.diagonal_scatter(x, y, 1, 0, 2),
        lambda: (_randn(4, 3, 6), _randn(3, 4)),
    ),
    "diagonal_scatter_below_int": (
        lambda x, y: torch.diagonal_scatter(x, y, -2),
        lambda: (_ints(6, 5), _ints(4)),
    ),
    "as_strided_scatter": (
        lambda x, y: torch.as_strided_scatter(x, y, (3, 2), (4, 1), 2),
        lambda: (_randn(4, 6), _randn(3, 2)),
    ),
    "as_strided_scatter_transposed_int": (  # the copy keeps x's layout: positions follow it
        lambda x, y: torch.as_strided_scatter(x, y, (2, 3, 2), (12, 1, 5), 1),
        lambda: (_ints(6, 5).t(), _ints(2, 3, 2)),
    ),
    "ldexp": (torch.ldexp, lambda: (_randn(5, 6), torch.randint(-4, 5, (5, 6)))),
    "angle": (torch.angle, lambda: (torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.0]),)),
    "dist": (lambda x, y: torch.dist(x, y, 3), lambda: (_randn(4, 7), _randn(4, 7))),
    "permute_copy": (lambda x: torch.permute_copy(x, (2, 0, 1)), lambda: (_strided(3, 4, 5),)),
    "narrow_copy": (lambda x: torch.narrow_copy(x, 1, 2, 3), lambda: (_ints(4, 7),)),
    "grid_sample": (
        lambda x, g: F.grid_sample(x, g, align_corners=False),
        lambda: (_randn(2, 3, 6, 7), torch.rand(2, 4, 5, 2) * 2.2 - 1.1),
    ),
    "index_reduce_mean": (
        lambda x, i, s: x.index_reduce(0, i, s, "mean"),
        lambda: (_randn(5, 3), torch.tensor([0, 4, 2, 0, 4, 4]), _randn(6, 3)),
    ),
    "index_add_of_a_constant": (  # an atomic add of a constant made in the graph, on x's device
        lambda x, i: torch.ones_like(x).index_add(0, i, torch.ones(6, 3, device=x.device)),
        lambda: (_randn(5, 3), torch.tensor([0, 4, 2, 0, 4, 4])),
    ),
    "put_accumulate": (
        lambda x, i, v: x.put(i, v, accumulate=True),
        lambda: (_randn(3, 4), torch.tensor([0, 11, 5, 11]), _randn(4)),
    ),
    "roll": (lambda x: torch.roll(x, (2, -1), (0, 2)), lambda: (_randn(5, 3, 7),)),
    "roll_flat_int": (lambda x: torch.roll(x, 3), lambda: (_ints(4, 5),)),
    "linspace": (lambda: torch.linspace(-2.0, 3.0, 13), lambda: ()),
    "logspace": (lambda: torch.logspace(-1.0, 2.0, 9, base=3.0), lambda: ()),
    "eye": (lambda: torch.eye(5, 7, dtype=torch.int32), lambda: ()),
    "unfold_im2col": (
        lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        lambda: (_randn(2, 3, 7, 8),),
    ),
    "fold_col2im": (
        lambda y: F.fold(y, (5, 6), (2, 2), stride=(1, 2)),
        lambda: (_randn(2, 12, 12),),
    ),
    "tril_indices": (lambda: torch.tril_indices(7, 5, -1), lambda: ()),
    "triu_indices": (lambda: torch.triu_indices(4, 6, 2), lambda: ()),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (_randn(2, 3, 9, 11),)),
    "max_pool2d_ceil_dilated": (
        lambda x: F.max_pool2d(x, 2, 2, 0, dilation=2, ceil_mode=True),
        lambda: (_randn(1, 2, 10, 7),),
    ),
    "max_pool2d_indices_bf16": (
        lambda x: F.max_pool2d(x, (2, 3), return_indices=True),
        lambda: (_randn(2, 8, 9, dtype=torch.bfloat16),),
    ),
    "max_with_index_bf16": (
        lambda x: torch.max(x, -1),
        lambda: (_randn(4, 6, dtype=torch.bfloat16),),
    ),
    "max_pool2d_nan_and_inf": (
        lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        lambda: (torch.tensor([[[[float("-inf"), 1.0, float("nan"), 2.0, 0.0]] * 4]]),),
    ),
    "max_pool2d_all_minus_inf": (  # the first tap inside the input wins, as in eager
        lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        lambda: (torch.full((1, 1, 4, 5), float("-inf")),),
    ),
    "max_pool3d_dilated_ceil_bf16": (
        lambda x: F.max_pool3d(x, (3, 2, 3), 2, 1, (1, 2, 1), ceil_mode=True, return_indices=True),
        lambda: (_randn(1, 2, 5, 6, 7, dtype=torch.bfloat16),),
    ),
    "max_pool2d_large_window": (  # 36 taps: a max and an argmax over the window
        lambda x: F.max_pool2d(x, 6, 3, return_indices=True),
        lambda: (_randn(1, 2, 9, 9),),
    ),
    "max_pool2d_large_window_dilated_ceil": (
        lambda x: F.max_pool2d(x, (5, 7), (2, 3), (2, 3), (1, 2), True, return_indices=True),
        lambda: (_randn(2, 3, 11, 17),),
    ),
    "max_pool2d_large_window_nans_bf16": (  # several NaNs in a window: the last one's index
        lambda x: F.max_pool2d(x, 6, 3, 2, return_indices=True),
        lambda: (_with_nans(_randn(2, 13, 14), (0, 1, 1), (0, 2, 3), (1, 12, 13)).bfloat16(),),
    ),
    "max_pool2d_large_window_all_minus_inf": (  # the first tap inside the input, not the padding
        lambda x: F.max_pool2d(x, 6, 2, 3, return_indices=True),
        lambda: (torch.full((1, 1, 8, 9), float("-inf")),),
    ),
    "max_pool3d_large_window_ceil": (
        lambda x: F.max_pool3d(x, 3, 2, 0, ceil_mode=True, return_indices=True),
        lambda: (_randn(1, 2, 3, 6, 5),),
    ),
    "max_pool1d": (lambda x: F.max_pool1d(x, 4, 3, 2), lambda: (_strided(2, 3, 13),)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 2, 1), lambda: (_randn(1, 2, 5, 6, 7),)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), lambda: (_randn(2, 3, 9, 11),)),
    "avg_pool2d_no_pad_count": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (_randn(2, 3, 9, 10),),
    ),
    "avg_pool2d_divisor_bf16": (
        lambda x: F.avg_pool2d(x, (2, 3), (1, 2), divisor_override=5),
        lambda: (_randn(3, 8, 8, dtype=torch.bfloat16),),
    ),
    "avg_pool2d_big_window": (
        lambda x: F.avg_pool2d(x, 7, 3, 2, ceil_mode=True, count_include_pad=False),
        lambda: (_randn(2, 3, 17, 17),),
    ),
    "avg_pool1d_strided": (lambda x: F.avg_pool1d(x, 3, 2, 1), lambda: (_strided(2, 3, 10),)),
    "avg_pool3d": (
        lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
        lambda: (_randn(1, 2, 7, 6, 7),),
    ),
    "adaptive_avg_pool2d": (
        lambda x: F.adaptive_avg_pool2d(x, (3, 5)),
        lambda: (_randn(2, 3, 8, 11),),
    ),
    "adaptive_avg_pool2d_even": (lambda x: F.adaptive_avg_pool2d(x, 2), lambda: (_randn(2, 6, 8),)),
    "adaptive_max_pool2d_nan": (
        lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True),
        lambda: (
            torch.where(torch.rand(2, 3, 8, 11) < 0.05, float("nan"), torch.randn(2, 3, 8, 11)),
        ),
    ),
    "adaptive_max_pool1d_bf16": (
        lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True),
        lambda: (_randn(2, 3, 10, dtype=torch.bfloat16),),
    ),
    "adaptive_max_pool3d": (
        lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True),
        lambda: (_randn(1, 2, 3, 5, 6),),
    ),
    "adaptive_max_pool3d_global": (
        lambda x: F.adaptive_max_pool3d(x, 1, return_indices=True),
        lambda: (_randn(2, 3, 4, 5, 3),),
    ),
    "adaptive_max_pool2d_global_nans": (  # several NaNs in a window: the last one's index
        lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True),
        lambda: (_with_nans(_randn(4, 7, 9), (0, 1, 2), (0, 5, 3), (1, 6, 8)),),
    ),
    "adaptive_max_pool1d_global_bf16": (
        lambda x: F.adaptive_max_pool1d(x, 1, return_indices=True),
        lambda: (_randn(2, 3, 40, dtype=torch.bfloat16),),
    ),
    "adaptive_max_pool2d_even_wide": (  # 5 x 5 windows: max pooling's 25 taps
        lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True),
        lambda: (_randn(2, 3, 10, 10),),
    ),
}


#: every case runs on the CPU (Triton's interpreter) and, with a GPU, compiled for CUDA
DEVICES = ["cpu", CUDA]


def on_device(device: str, request, tree):
    """`tree`'s tensors on `device`; on CUDA, kernels compiled (not interpreted)."""
    if device == "cuda":
        request.getfixturevalue("compiled_for_the_gpu")
    return torch.utils._pytree.tree_map(
        lambda a: a.to(device) if isinstance(a, torch.Tensor) else a, tree
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", CASES)
def test_matches_eager_in_own_kernels(name, device, request, tmp_path, monkeypatch):
    matches_eager_in_own_kernels(name, device, request, tmp_path, monkeypatch)


#: cases whose answer is ill-conditioned where the samples reach: erfcx(x) = 2 exp(x^2) - erfcx(-x)
#: for x near -8 carries x^2's rounding (1e-6 relative) into a 1e28 result, so libdevice and
#: torch's CUDA kernel differ there by 2e-6 (H200); assert_close's f32 default allows 1.3e-6
TOLERANCES = {"special_erfcx": dict(rtol=1e-5, atol=1e-5)}


def matches_eager_in_own_kernels(name, device, request, tmp_path, monkeypatch):
    fn, make = CASES[name]
    args = on_device(device, request, make())
    want = fn(*args)
    got, source = compiled(fn, *args, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(got, want, equal_nan=True, **TOLERANCES.get(name, {}))
    assert "@triton.jit" in source
    assert "torch.ops.aten" not in source  # no ATen call: every op ran in mind's kernels


def test_a_stack_of_empty_tensors_compiles(tmp_path, monkeypatch):
    """Its reshape split an index over sizes of 0, dividing by them (OpInfo's stack, sample 7):
    an empty tensor's index reads nothing, and the graph launches no kernel."""
    a, b = _randn(0, 1, 0), _randn(0, 1, 0)
    fn = lambda a, b: torch.stack([a, b]) + 1  # noqa: E731
    got, source = compiled(fn, a, b, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert got.shape == (2, 0, 1, 0) and "_launch(" not in source.split("def call")[1]


def test_lcm_keeps_gcd_in_aten_as_inductor(tmp_path, monkeypatch):
    """Inductor's lcm is a kernel around ATen's gcd, which it keeps as a fallback: mind too."""
    a, b = _nonzero_ints(5, 4), _nonzero_ints(5, 4)
    got, source = compiled(torch.lcm, a, b, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(got, torch.lcm(a, b))
    assert "@triton.jit" in source and "aten.gcd" in source


def test_as_strided_scatter_into_a_layout_with_gaps_stays_in_aten(tmp_path, monkeypatch):
    """Eager's copy keeps the gaps of a strided self, and positions in them are written and
    lost: no index maps them, so it runs in ATen (with eager's answer and strides)."""
    x, y = _strided(5, 6), _randn(4)
    fn = lambda x, y: torch.as_strided_scatter(x, y, (4,), (7,), 3)  # noqa: E731
    got, source = compiled(fn, x, y, tmp_path=tmp_path, monkeypatch=monkeypatch)
    want = fn(x, y)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() and "aten.as_strided_scatter" in source


def test_as_strided_of_an_input_that_starts_inside_its_storage(tmp_path, monkeypatch):
    """Eager counts as_strided's offset from the start of the input's storage, which here begins
    two elements before the input: types carry no storage offset, so ATen runs it, and the
    multiply after it reads the right elements (mind's view read them two elements late)."""
    base = torch.arange(10.0)
    fn = lambda x: x.as_strided((2, 2), (1, 1), 1) * 2  # noqa: E731
    for x in (base[2:], base):
        torch._dynamo.reset()
        got, source = compiled(fn, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
        torch.testing.assert_close(got, fn(x))
        assert "aten.as_strided" in source


#: name -> (fn, input shape); the backward runs in mind's own kernels too (a gather over the
#: windows that span each input position; max pooling's over more than 25 of them as a
#: scatter_add of the gradient at the forward's indices)
BACKWARD = {
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 11)),
    "max_pool2d_overlap_ceil": (lambda x: F.max_pool2d(x, 3, 1, ceil_mode=True), (1, 2, 7, 8)),
    "max_pool2d_unbatched_bf16": (  # accumulated in f32 (windows apart: eager's sums are exact)
        lambda x: F.max_pool2d(x.to(torch.bfloat16), 2, 3, 1).float(),
        (3, 8, 10),
    ),
    "max_pool3d_overlap": (lambda x: F.max_pool3d(x, 3, 2, 1), (1, 2, 5, 6, 7)),
    "max_pool2d_dilated_ceil": (  # windows 5 wide, their taps 2 apart: 3 x 3 span a position
        lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True),
        (2, 3, 10, 9),
    ),
    "max_pool2d_many_windows": (lambda x: F.max_pool2d(x, 6, 1, 2), (1, 2, 9, 8)),  # scatter
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 9, 11)),
    "avg_pool2d_ceil_no_pad_count": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        (2, 3, 9, 10),
    ),
    "avg_pool2d_stride_past_kernel": (lambda x: F.avg_pool2d(x, 2, 3, 1, True), (2, 10, 13)),
    "avg_pool2d_divisor": (
        lambda x: F.avg_pool2d(x, (2, 3), (1, 2), divisor_override=5),
        (3, 8, 8),
    ),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False), (1, 2, 7, 6, 7)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", BACKWARD)
def test_backward_in_own_kernels(name, device, request, tmp_path, monkeypatch):
    backward_in_own_kernels(name, device, request, tmp_path, monkeypatch)


def backward_in_own_kernels(name, device, request, tmp_path, monkeypatch):
    fn, shape = BACKWARD[name]
    x = on_device(device, request, torch.randn(shape)).requires_grad_()
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        y = torch.compile(fn, backend="mind")(x)
        grad = torch.randn_like(y)
        y.backward(grad)
    got, x.grad = x.grad, None
    fn(x).backward(grad)
    torch.testing.assert_close(got, x.grad)
    backward = "\n".join(p.read_text() for p in tmp_path.glob("*backward*.py"))
    assert "@triton.jit" in backward and "torch.ops.aten" not in backward


@pytest.mark.parametrize("name", ["max_pool2d", "max_pool3d_overlap", "max_pool2d_dilated_ceil"])
def test_max_pool_backward_gathers(name, tmp_path, monkeypatch):
    """The backward is one kernel that gathers from the windows spanning each position (as
    Inductor's lowering): no zero-filled f32 buffer, no atomic adds, no cast after."""
    backward_in_own_kernels(name, "cpu", None, tmp_path, monkeypatch)
    (source,) = [p.read_text() for p in tmp_path.glob("*backward*.py")]
    assert source.count("@triton.jit") == 1 and "atomic" not in source


#: ops that torch 2.11's decomposition table has no rule for (2.14's has some): mind's own
#: rules (passes/aten_rules/) decompose them on either
TORCH_VERSION_RULES = (
    torch.ops.aten.adaptive_max_pool2d,
    torch.ops.aten.adaptive_max_pool3d,
    torch.ops.aten.max_pool2d_with_indices_backward,
    torch.ops.aten.max_pool3d_with_indices_backward,
)


@pytest.fixture
def torch_without_pooling_rules(monkeypatch):
    """torch's decomposition table as torch 2.11's: no rule for `TORCH_VERSION_RULES`."""
    from mind.passes.to_aten import decompositions

    for packet in TORCH_VERSION_RULES:
        for overload in packet.overloads():
            table = torch._decomp.decomposition_table
            monkeypatch.delitem(table, getattr(packet, overload), raising=False)
    decompositions.cache_clear()
    yield
    decompositions.cache_clear()


@pytest.mark.usefixtures("torch_without_pooling_rules")
@pytest.mark.parametrize(
    "name",
    [
        "adaptive_max_pool3d_global",
        "adaptive_max_pool2d_global_nans",
        "adaptive_max_pool1d_global_bf16",
        "adaptive_max_pool2d_even_wide",
    ],
)
def test_without_torchs_pooling_rules_in_own_kernels(name, request, tmp_path, monkeypatch):
    matches_eager_in_own_kernels(name, "cpu", request, tmp_path, monkeypatch)


@pytest.mark.usefixtures("torch_without_pooling_rules")
@pytest.mark.parametrize("name", [n for n in BACKWARD if n.startswith("max_pool")])
def test_without_torchs_pooling_rules_backward_in_own_kernels(name, request, tmp_path, monkeypatch):
    backward_in_own_kernels(name, "cpu", request, tmp_path, monkeypatch)


def test_every_rule_mind_names_is_in_this_torchs_table():
    """The torch rules mind asks for by name are in its table on this torch (one that lacks a
    rule leaves the op to ATen, and its 'own kernels' tests fail only where that torch runs):
    run on each torch mind supports, this lists what a version lacks."""
    from mind.passes import to_aten

    table = to_aten.decompositions()
    names = (*to_aten._EXTRA_DECOMPOSITIONS, *to_aten._INDUCTOR_RULES, *to_aten._BATCH_NORM)
    missing = []
    for name in names:
        op = to_aten._aten_op(name)  # (None: this torch has no such op, which never shows)
        overloads = [getattr(op, o) for o in op.overloads()] if hasattr(op, "overloads") else [op]
        if op is not None and not any(o in table for o in overloads):
            missing.append(name)
    assert missing == []


@pytest.mark.usefixtures("torch_without_pooling_rules")
def test_adaptive_max_pool_to_an_empty_output_compiles():
    """An output size of 0 gives eager's empty values and indices (the unrolled lowering
    would divide by it)."""
    x = _randn(2, 3, 4, 5)
    fn = lambda x: F.adaptive_max_pool2d(x, (0, 2), return_indices=True)  # noqa: E731
    with no_fallback():
        got = torch.compile(fn, backend="mind")(x)
    assert [(t.shape, t.dtype) for t in got] == [(t.shape, t.dtype) for t in fn(x)]


def test_extern_naming_a_device_compiles(tmp_path, monkeypatch):
    """A graph whose only op is an ATen call with `device=cpu` (no kernel binds the device
    first): the wrapper's device name is defined (it was a NameError, and a fallback)."""
    got, source = compiled(
        lambda: torch.empty_permuted((3, 4), (1, 0)), tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    assert got.shape == (3, 4) and got.stride() == (1, 3)
    assert "cpu = torch.device('cpu')" in source


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        lambda x: F.max_pool2d(x, 3, 2, 1),
        lambda x: torch.flip(x, (-1, -2)),
        lambda x: F.leaky_relu(x, 0.2),
    ],
    ids=["avg_pool2d", "max_pool2d", "flip", "leaky_relu"],
)
def test_symbolic_shapes_compile_once(fn):
    """Under dynamic=True one compiled graph serves three shapes, without a fallback."""
    from torch._dynamo.utils import counters

    compiled_fn = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for shape in (
            (2, 3, 9, 11),
            (4, 5, 12, 7),
            (3, 2, 16, 16),
        ):  # no size 1: Dynamo specializes it
            x = torch.randn(shape)
            torch.testing.assert_close(compiled_fn(x), fn(x))
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str
)
def test_frexp_is_exact(dtype, tmp_path, monkeypatch):
    """frexp splits the bits: signed zeros, infinities, NaN, the largest and smallest normal and
    subnormal magnitudes and random values give eager's mantissa bits and exponent exactly. Not
    bf16 subnormals on the CPU: Triton's interpreter casts them to f32 wrongly (any kernel)."""
    info = torch.finfo(dtype)
    values = [0.0, -0.0, 1.0, -0.75, info.max, -info.max, info.tiny, -info.tiny * 3]
    values += [float("inf"), float("-inf"), float("nan")]
    if dtype != torch.bfloat16:
        values += [info.smallest_normal / 8 * 5, -info.smallest_normal * info.eps]  # subnormal
    x = torch.cat([torch.tensor(values, dtype=dtype), torch.randn(300, dtype=dtype) * 1e3])
    got, source = compiled(torch.frexp, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    want = torch.frexp(x)
    assert "torch.ops.aten" not in source and source.count("@triton.jit") == 1
    assert got.exponent.dtype == torch.int32 and torch.equal(got.exponent, want.exponent)
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
    same = (got.mantissa.view(bits) == want.mantissa.view(bits)) | want.mantissa.isnan()
    assert bool(same.all()), (x[~same], got.mantissa[~same], want.mantissa[~same])


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str
)
def test_nextafter_is_exact_on_its_own_dtype(dtype, tmp_path, monkeypatch):
    """nextafter steps the bits of its own dtype (bf16 is not upcast): every pair of special
    values (signed zeros, infinities, NaN, the largest and smallest magnitudes) and random
    pairs give eager's bits exactly."""
    info = torch.finfo(dtype)
    special = torch.tensor(
        [0.0, -0.0, 1.0, -1.0, 2.5, info.max, -info.max, info.tiny, float("inf"), float("nan")],
        dtype=dtype,
    )
    n = len(special)
    a = torch.cat([special.repeat_interleave(n), torch.randn(500, dtype=dtype)])
    b = torch.cat([special.repeat(n), torch.randn(500, dtype=dtype)])
    got, source = compiled(torch.nextafter, a, b, tmp_path=tmp_path, monkeypatch=monkeypatch)
    want = torch.nextafter(a, b)
    assert got.dtype == dtype and "torch.ops.aten" not in source
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
    same = (got.view(bits) == want.view(bits)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (a[~same], b[~same], got[~same], want[~same])
