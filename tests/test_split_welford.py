"""Split reductions (passes/split_reductions.py) and the welford rewrite (passes/welford.py,
codegen/welford.py), end to end on CPU tensors through Triton's interpreter, against eager."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from mind.passes.split_reductions import split_factor

from mind.options import PIPELINE

pytestmark = [
    pytest.mark.usefixtures("isolated_runtime"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),  # masked lanes
]

#: looped kernels (rows over 16 elements), and splits sized for a 2-SM GPU
LOOPED = PIPELINE.replace("to-triton", "to-triton{persistent-max=16,max-r-block=32}")
SPLIT = PIPELINE.replace("split-reductions", "split-reductions{sm-count=2}").replace(
    "fuse", "fuse{sm-count=2}"
)
NO_WELFORD = PIPELINE.replace("welford,", "")
#: splits sized for a 16-SM GPU: a softmax of up to 4 rows splits
SPLIT16 = PIPELINE.replace("split-reductions", "split-reductions{sm-count=16}").replace(
    "fuse", "fuse{sm-count=16}"
)


def run(fn, *args, pipeline: str = PIPELINE):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fallback to eager fails the test
        return torch.compile(fn, backend="mind", options={"pipeline": pipeline})(*args)


def close(got, want, rtol):
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g.double(), w.double(), rtol=rtol, atol=rtol)


def variances(x):
    mean = x.mean(-1, keepdim=True)
    by_hand = ((x - mean) ** 2).mean(-1)
    return torch.var_mean(x, -1), x.var(0), F.layer_norm(x, x.shape[-1:]), by_hand


@pytest.mark.parametrize("pipeline", [PIPELINE, LOOPED, NO_WELFORD], ids=["rows", "looped", "two"])
def test_variance_at_a_large_offset(pipeline):
    """Rows far from 0: E[x^2] - E[x]^2 loses every digit there; the welford kind (its mean and
    m2 in registers, or carried through an r-loop and merged) keeps about four."""
    x = torch.randn(37, 100, dtype=torch.float64) * 3 + 1e4
    want = variances(x)
    close(run(variances, x.float(), pipeline=pipeline), want, rtol=1e-3)
    naive = (x.float() ** 2).mean(-1) - x.float().mean(-1) ** 2
    assert (naive.double() - x.var(-1, correction=0)).abs().max() > 1.0


def test_welford_reads_the_row_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = torch.randn(8, 100)
    close(run(lambda x: torch.var_mean(x, -1), x, pipeline=LOOPED), torch.var_mean(x, -1), 1e-4)
    (text,) = [p.read_text() for p in tmp_path.glob("*_forward.*.triton")]
    assert text.count("triton.for") == 1


def test_full_sum_splits_into_partials_and_a_final_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = torch.randn(40000)
    close(run(lambda x: x.sum(), x, pipeline=SPLIT), x.double().sum(), 1e-4)
    (text,) = [p.read_text() for p in tmp_path.glob("*_forward.*.triton")]
    assert text.count("triton.launch") == 2
    assert "%buf0_part0 = triton.empty_strided((5,), (1,)) : f32[5][1]cpu" in text


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_kinds(dtype):
    def fn(x, y):
        return x.sum(), x.amax(), x.amin(), (x > 2).any(), (x > -9).all(), y.sum(0), y.prod(0)

    x = torch.randn(40000).to(dtype)
    y = (1 + torch.randn(3000, 5) / 100).to(dtype)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    close(run(fn, x, y, pipeline=SPLIT), fn(x.double(), y.double()), tol)


def test_per_channel_statistics_split_with_welford():
    """Batch-norm statistics: per channel over (N, H, W), few channels: each channel's parts
    reduce in one welford pass, then merge."""

    def stats(x):
        return torch.var_mean(x, (0, 2, 3), correction=0)

    x = torch.randn(16, 3, 20, 20) * 2 + 50
    close(run(stats, x, pipeline=SPLIT), stats(x.double()), 1e-4)


def test_split_keeps_the_epilogue():
    """What the node computes from its reductions (the mean from the sum, a norm) runs once per
    row in the final kernel."""

    def fn(x):
        return x.mean(0), x.norm(), torch.softmax(x.sum(0), 0)

    x = torch.randn(3000, 7)
    close(run(fn, x, pipeline=SPLIT), fn(x.double()), 1e-4)


def test_batch_norm_splits_and_normalizes_apart(tmp_path, monkeypatch):
    """A training batch norm and ReLU: few channels, many elements each. Its statistics (and
    in the backward, its gradient sums) split into parts, so the values normalized by them,
    stored along the rows, are a kernel of their own: fused, no row would be whole to store
    along, and two programs walked all of them (44 ms of a ResNet step on an H200)."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    bn = torch.nn.BatchNorm2d(3)

    def fn(x):
        return F.relu(bn(x))

    x = torch.randn(8, 3, 40, 40, requires_grad=True)
    got = run(fn, x, pipeline=SPLIT)
    (grad,) = torch.autograd.grad(got.square().sum(), x)
    want = fn(x)
    close((got, grad), (want, *torch.autograd.grad(want.square().sum(), x)), 1e-4)
    texts = [p.read_text() for p in tmp_path.glob("*.triton")]
    assert len(texts) == 2 and all("_part0 = triton.empty_strided" in t for t in texts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_stores_what_it_computes_along_r(dtype, tmp_path, monkeypatch):
    """A layer norm's backward shape: a gradient stored along r and two column sums of it (a
    bias's, and a weight's with per-row statistics read along r). It splits: the partial
    kernel stores the gradient, every element once, beside the partial sums."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    def fn(a, b, w, mean, rstd):
        g = (a + b) * w
        return g, g.sum(0), (g * (a - mean[:, None]) * rstd[:, None]).sum(0)

    # positive terms: sums far from 0, where bf16 rounding of the terms stays relative
    a, b = (torch.rand(512, 64).to(dtype) for _ in range(2))
    w, mean, rstd = torch.rand(64).to(dtype), torch.rand(512) - 1, torch.rand(512)
    want = fn(*(t.double() for t in (a, b, w, mean, rstd)))
    close(
        run(fn, a, b, w, mean, rstd, pipeline=SPLIT), want, 1e-4 if dtype == torch.float32 else 3e-2
    )
    (text,) = [p.read_text() for p in tmp_path.glob("*_forward.*.triton")]
    assert text.count("triton.launch") == 2


def test_split_factor_is_inductors():
    """Inductor's reduction_split_factor on an H200 (132 SMs), by hand: a 2**26 sum splits into
    512 parts, an 8192 x 8192 column sum into 16; many rows or short rows do not split."""
    assert split_factor(1, 2**26, True, 132) == 512
    assert split_factor(8192, 8192, False, 132) == 16
    assert split_factor(64, 200704, False, 132) == 1024
    assert split_factor(16384, 4096, True, 132) == 1
    assert split_factor(1, 8192, True, 132) == 1
    assert split_factor(100, 32, False, 132) == 1


def test_a_node_storing_no_reduced_value_is_not_split():
    """Its reductions are dead (it stores only along r): a split's second kernel would write
    nothing, and have no buffer to launch on (found by the fuzzer)."""
    from mind.passes import run_pipeline
    from mind.target.triton import emit

    import mind

    text = """scheduled.graph @column_mean(%arg0_1: bf16[8192, 64][64, 1]cuda:0) {
  %buf0 = scheduled.node @op0 {sizes = ([64], [8192]), device = cuda:0, origins = ["mean"], writes = [(%buf0, c0, {c0: 64})], met = [], unmet = []} : bf16[64][1]cuda:0 {
    %0 = scheduled.load(%arg0_1, p0 + 64*p1) : bf16
    %1 = scheduled.cast(%0) : f32
    %2 = scheduled.reduction(%1) {reduction_type = "sum"} : f32
    scheduled.store(%buf0, p0, %0)
  }
  scheduled.output(%buf0)
}
"""  # noqa: E501
    source = emit(run_pipeline(mind.parse(text), "to-triton"))
    assert source.count("@triton.jit") == 1


def test_a_column_sum_read_through_a_reshape_splits():
    """The column sum of three stacked [8192, 64] gradients: its index steps memory along x by
    floor and Mod (not linear in p0), and the step from the origin says it reads along x, a
    column sum (not a row read along r): it splits, as an affine one does."""
    from mind.passes import run_pipeline
    from mind.target.triton import emit

    import mind

    text = """scheduled.graph @stacked_bias_grad(%arg0_1: bf16[3, 8192, 64][524288, 64, 1]cuda:0) {
  %buf0 = scheduled.node @op0 {sizes = ([192], [8192]), device = cuda:0, origins = ["sum"], writes = [(%buf0, c0, {c0: 192})], met = [], unmet = []} : bf16[192][1]cuda:0 {
    %0 = scheduled.load(%arg0_1, Mod(p0, 64) + 64*p1 + 524288*floor(p0/64)) : bf16
    %1 = scheduled.cast(%0) : f32
    %2 = scheduled.reduction(%1) {reduction_type = "sum"} : f32
    %3 = scheduled.cast(%2) : bf16
    scheduled.store(%buf0, p0, %3)
  }
  scheduled.output(%buf0)
}
"""  # noqa: E501
    source = emit(run_pipeline(mind.parse(text), "split-reductions,to-triton"))
    assert source.count("@triton.jit") == 2


def test_a_softmax_of_few_long_rows_splits_its_online_reduction(tmp_path, monkeypatch):
    """Rows too few to fill the GPU (a decoder's logits, at most a quarter as many as SMs): each
    row's max and sum of exp, one online_softmax reduction, split into parts whose (max, sum)
    merge. Parts of -inf alone (masked logits) add nothing; a row of -inf alone gives eager's
    nan. Cross entropy's log-softmax splits too (and its backward's sums), with eager's loss
    and gradient."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x = torch.randn(3, 9000) * 3
    x[0, :5000] = float("-inf")  # its first part is -inf alone
    x[1] = float("-inf")
    x[2, 8000:] = float("-inf")
    got = run(lambda x: torch.softmax(x, -1), x, pipeline=SPLIT16)
    close(got[[0, 2]], torch.softmax(x[[0, 2]].double(), -1), 1e-5)
    assert got[1].isnan().all()
    logits = torch.randn(2, 9000, requires_grad=True)
    target = torch.tensor([3, 8999])

    def loss(logits, target):
        return F.cross_entropy(logits * 2, target)

    got = run(loss, logits, target, pipeline=SPLIT16)
    (grad,) = torch.autograd.grad(got, logits)
    want = loss(logits.double(), target)
    close((got, grad), (want, torch.autograd.grad(want, logits)[0]), 1e-5)
    forward = [p.read_text() for p in tmp_path.glob("*_forward.*.split-reductions.scheduled")]
    assert len(forward) == 2 and all('"online_softmax"} : f32, f32' in t for t in forward)
    assert all(".partial {" in p.read_text() for p in tmp_path.glob("*.split-reductions.*"))
