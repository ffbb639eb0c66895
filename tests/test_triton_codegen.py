"""to-triton and Python emission, end to end on CPU tensors through Triton's interpreter:
hand-written scheduled graphs -> triton IR (which must print, parse and print identically) ->
Python source -> run, compared with eager PyTorch."""

import os
import weakref

import pytest
import torch
from mind.codegen import heuristics, kernel
from mind.ir.printer import print_module
from mind.parser import parse
from mind.passes import run_pipeline
from mind.runtime import load
from mind.target.triton import emit


def compile_graph(text: str, pipeline: str = "to-triton"):
    module = run_pipeline(parse(text), pipeline)
    printed = print_module(module)
    assert print_module(parse(printed)) == printed
    return printed, load(emit(module), "generated", interpret=True)


def graph(args: str, body: str, out: str = "%buf0") -> str:
    return f"scheduled.graph @g({args}) {{\n{body}\n  scheduled.output({out})\n}}\n"


def node(sizes, origins, result, writes, body) -> str:
    return (
        f"  %buf0 = scheduled.node @op0 {{sizes = {sizes}, device = cpu, origins = {origins}, "
        f"writes = {writes}, met = [], unmet = []}} : {result} {{\n{body}\n  }}"
    )


#: the lit test's seed, on CPU tensors (the emitted wrapper allocates on the IR's devices)
SEED = (
    open(os.path.join(os.path.dirname(__file__), "..", "lit_tests", "triton", "seed.scheduled"))
    .read()
    .replace("cuda:0", "cpu")
)


def test_seed_persistent_reduction():
    printed, mod = compile_graph(SEED)
    assert "triton.kernel @triton_per_fused_add_mul_relu_sum_0(" in printed
    assert "constexprs = {XBLOCK: 1, R0_BLOCK: 128}, num_warps = 2, num_stages = 1" in printed
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    (out,) = mod.call([a, b, c])
    torch.testing.assert_close(out, ((a + b) * c.relu()).sum(-1))


ADD_RELU = graph(
    "%arg0_1: f32[1000][1]cpu, %arg1_1: f32[1000][1]cpu",
    node(
        "([1000], [])",
        '["add", "relu"]',
        "f32[1000][1]cpu",
        "[(%buf0, c0, {c0: 1000})]",
        """
    %0 = scheduled.load(%arg0_1, p0) : f32
    %1 = scheduled.load(%arg1_1, p0) : f32
    %2 = scheduled.add(%0, %1) : f32
    %3 = scheduled.relu(%2) : f32
    scheduled.store(%buf0, p0, %3)""",
    ),
)


def test_pointwise_add_relu():
    printed, mod = compile_graph(ADD_RELU)
    assert "@triton_poi_fused_add_relu_0" in printed
    assert "constexprs = {XBLOCK: 1024}, num_warps = 4" in printed
    x, y = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(mod.call([x, y])[0], (x + y).relu())


def softmax_body(width: int) -> str:
    """A node body computing softmax over rows of `width`: the max, then the sum of exp (a
    reduction each, unfused)."""
    return f"""\
    %0 = scheduled.load(%arg0_1, {width}*p0 + p1) : f32
    %1 = scheduled.reduction(%0) {{reduction_type = "max"}} : f32
    %2 = scheduled.sub(%0, %1) : f32
    %3 = scheduled.exp(%2) : f32
    %4 = scheduled.reduction(%3) {{reduction_type = "sum"}} : f32
    %5 = scheduled.truediv(%3, %4) : f32
    scheduled.store(%buf0, {width}*p0 + p1, %5)"""


SOFTMAX = graph(
    "%arg0_1: f32[8, 100][100, 1]cpu",
    node(
        "([8], [100])",
        '["amax", "div", "exp", "sub", "sum"]',
        "f32[8, 100][100, 1]cpu",
        "[(%buf0, c0, {c0: 800})]",
        "\n" + softmax_body(100),
    ),
)


@pytest.mark.parametrize(
    "pipeline, prefix",
    [
        ("online-softmax,to-triton", "triton_per_"),
        ("online-softmax,to-triton{persistent-max=16,max-r-block=32}", "triton_red_"),
    ],
)
def test_softmax(pipeline, prefix):
    printed, mod = compile_graph(SOFTMAX, pipeline)
    assert f"{prefix}fused_amax_div_exp_sub_sum_0" in printed
    assert printed.count("triton.for") == (2 if prefix == "triton_red_" else 0)
    x = torch.randn(8, 100)
    torch.testing.assert_close(mod.call([x])[0], x.softmax(-1))


def fused_softmax(log: bool) -> str:
    """Softmax or log_softmax as fuse leaves it: each use of the row reloads it."""
    tail = (
        """
    %8 = scheduled.log(%5) : f32
    %9 = scheduled.sub(%7, %8) : f32"""
        if log
        else """
    %8 = scheduled.exp(%7) : f32
    %9 = scheduled.truediv(%8, %5) : f32"""
    )
    return graph(
        "%arg0_1: f32[6, 100][100, 1]cpu",
        node(
            "([6], [100])",
            '["amax", "exp", "sub", "sum"]',
            "f32[6, 100][100, 1]cpu",
            "[(%buf0, c0, {c0: 600})]",
            f"""
    %0 = scheduled.load(%arg0_1, 100*p0 + p1) : f32
    %1 = scheduled.reduction(%0) {{reduction_type = "max"}} : f32
    %2 = scheduled.load(%arg0_1, 100*p0 + p1) : f32
    %3 = scheduled.sub(%2, %1) : f32
    %4 = scheduled.exp(%3) : f32
    %5 = scheduled.reduction(%4) {{reduction_type = "sum"}} : f32
    %6 = scheduled.load(%arg0_1, 100*p0 + p1) : f32
    %7 = scheduled.sub(%6, %1) : f32{tail}
    scheduled.store(%buf0, 100*p0 + p1, %9)""",
        ),
    )


def rows_with_inf() -> torch.Tensor:
    x = torch.randn(6, 100) * 10
    x[1, :70] = float("-inf")  # the row's first blocks are all -inf: the max grows from -inf
    x[2, 40:] = float("-inf")  # -inf after the max: those lanes add exp(-inf) = 0
    x[3, ::3] = float("-inf")
    x[4] = float("-inf")  # eager gives nan
    x[5, 99] = 80.0  # the max arrives in the last, partly masked block
    return x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan from -inf - -inf, as in eager
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("online", [True, False])
def test_online_softmax(log, online):
    rewrite = "online-softmax," if online else ""
    pipeline = f"{rewrite}to-triton{{persistent-max=16,max-r-block=32}}"
    printed, mod = compile_graph(fused_softmax(log), pipeline)
    source = emit(parse(printed))
    assert source.count("for r0_offset") == (2 if online else 3)
    x = rows_with_inf()
    want = x.log_softmax(-1) if log else x.softmax(-1)
    got = mod.call([x])[0]
    assert got[4].isnan().all()
    torch.testing.assert_close(got, want, equal_nan=True)


COLUMN_SUM = graph(
    "%arg0_1: f32[64, 48][48, 1]cpu",
    node(
        "([48], [64])",
        '["sum"]',
        "f32[48][1]cpu",
        "[(%buf0, c0, {c0: 48})]",
        """
    %0 = scheduled.load(%arg0_1, p0 + 48*p1) : f32
    %1 = scheduled.reduction(%0) {reduction_type = "sum"} : f32
    scheduled.store(%buf0, p0, %1)""",
    ),
)


@pytest.mark.parametrize("pipeline", ["to-triton", "to-triton{persistent-max=16}"])
def test_column_sum_is_outer(pipeline):
    printed, mod = compile_graph(COLUMN_SUM, pipeline)
    # x is the contiguous dim: XBLOCK > 1, rows of the tile read contiguous columns; a tile in
    # registers stays at 512 elements (8 columns of 64); looped, these few short columns take 8
    # a program, all 64 rows in one step (32 columns would leave 2 programs)
    want = (
        'kind = "persistent_reduction", constexprs = {XBLOCK: 8, R0_BLOCK: 64}'
        if pipeline == "to-triton"
        else 'kind = "reduction", constexprs = {XBLOCK: 8, R0_BLOCK: 64}'
    )
    assert want in printed
    x = torch.randn(64, 48)
    torch.testing.assert_close(mod.call([x])[0], x.sum(0))


ARGMAX = graph(
    "%arg0_1: f32[6, 50][50, 1]cpu",
    node(
        "([6], [50])",
        '["argmax"]',
        "i64[6][1]cpu",
        "[(%buf0, c0, {c0: 6})]",
        """
    %0 = scheduled.load(%arg0_1, 50*p0 + p1) : f32
    %1 = scheduled.reduction(%0) {reduction_type = "argmax"} : i64
    scheduled.store(%buf0, p0, %1)""",
    ),
)


@pytest.mark.parametrize("pipeline", ["to-triton", "to-triton{persistent-max=16,max-r-block=16}"])
def test_argmax(pipeline):
    printed, mod = compile_graph(ARGMAX, pipeline)
    x = torch.randn(6, 50)
    x[2, 7] = x[2, 30] = 100.0  # ties resolve to the first index
    torch.testing.assert_close(mod.call([x])[0], x.argmax(-1))


TRANSPOSE_ADD = graph(
    "%arg0_1: f32[32, 48][48, 1]cpu, %arg1_1: f32[48, 32][32, 1]cpu",
    node(
        "([32, 48], [])",
        '["add"]',
        "f32[32, 48][48, 1]cpu",
        "[(%buf0, c0, {c0: 1536})]",
        """
    %0 = scheduled.load(%arg0_1, 48*p0 + p1) : f32
    %1 = scheduled.load(%arg1_1, p0 + 32*p1) : f32
    %2 = scheduled.add(%0, %1) : f32
    scheduled.store(%buf0, 48*p0 + p1, %2)""",
    ),
)


def test_transpose_add_tiles():
    printed, mod = compile_graph(TRANSPOSE_ADD)
    # a 32 x 48 tile would be one program: the tile shrinks (YBLOCK first) to 256 elements
    assert "constexprs = {YBLOCK: 8, XBLOCK: 32}" in printed
    assert "grid = (2, 4, 1)" in printed
    x, y = torch.randn(32, 48), torch.randn(48, 32)
    torch.testing.assert_close(mod.call([x, y])[0], x + y.t())


def test_y_blocks_past_grid_axis_1_fold_over_axis_2(monkeypatch):
    """A tile's y blocks past grid axis 1's limit (65535 programs; 2 here) take axis 2 too."""
    for module in (heuristics, kernel):
        monkeypatch.setattr(module, "GRID_YZ_MAX", 2)
    printed, mod = compile_graph(TRANSPOSE_ADD)
    assert "grid = (2, 2, 2)" in printed  # 4 y blocks of 8 rows: 2 on axis 1, 2 on axis 2
    assert "triton.index(YBLOCK*(ypid + 2*ypid_z)" in printed
    x, y = torch.randn(32, 48), torch.randn(48, 32)
    torch.testing.assert_close(mod.call([x, y])[0], x + y.t())


# rows of a [16, 32, 48] tensor times a [48, 32] table read transposed and broadcast over the
# 16 batches: the table is 1/17 of the bytes the kernel touches (a rotary embedding's angles)
TABLE_ACROSS = graph(
    "%arg0_1: f32[16, 32, 48][1536, 48, 1]cpu, %arg1_1: f32[48, 32][32, 1]cpu",
    node(
        "([16, 32, 48], [])",
        '["mul"]',
        "f32[16, 32, 48][1536, 48, 1]cpu",
        "[(%buf0, c0, {c0: 24576})]",
        """
    %0 = scheduled.load(%arg0_1, 1536*p0 + 48*p1 + p2) : f32
    %1 = scheduled.load(%arg1_1, p1 + 32*p2) : f32
    %2 = scheduled.mul(%0, %1) : f32
    scheduled.store(%buf0, 1536*p0 + 48*p1 + p2, %2)""",
    ),
)


def test_a_small_table_read_across_keeps_the_kernel_1d():
    printed, mod = compile_graph(TABLE_ACROSS)
    assert "YBLOCK" not in printed
    assert "constexprs = {XBLOCK: 1024}" in printed
    x, t = torch.randn(16, 32, 48), torch.randn(48, 32)
    torch.testing.assert_close(mod.call([x, t])[0], x * t.t())


BF16 = graph(
    "%arg0_1: bf16[4, 64][64, 1]cpu",
    node(
        "([4], [64])",
        '["sum"]',
        "bf16[4][1]cpu",
        "[(%buf0, c0, {c0: 4})]",
        """
    %0 = scheduled.load(%arg0_1, 64*p0 + p1) : bf16
    %1 = scheduled.cast(%0) : f32
    %2 = scheduled.reduction(%1) {reduction_type = "sum"} : f32
    %3 = scheduled.cast(%2) : bf16
    scheduled.store(%buf0, p0, %3)""",
    ),
)


def test_bf16_reduction():
    printed, mod = compile_graph(BF16)
    assert "triton.load(%in_ptr0, %tmp2) {mask = %xmask} : bf16[XBLOCK, R0_BLOCK]" in printed
    x = torch.randn(4, 64).to(torch.bfloat16)
    torch.testing.assert_close(mod.call([x])[0], x.float().sum(-1).to(torch.bfloat16))


VAR = graph(
    "%arg0_1: f32[5, 40][40, 1]cpu",
    node(
        "([5], [40])",
        '["mean", "sub", "sum", "var"]',
        "f32[5][1]cpu",
        "[(%buf0, c0, {c0: 5})]",
        """
    %0 = scheduled.load(%arg0_1, 40*p0 + p1) : f32
    %1 = scheduled.reduction(%0) {reduction_type = "sum"} : f32
    %2 = scheduled.constant(40.0) : f32
    %3 = scheduled.truediv(%1, %2) : f32
    %4 = scheduled.sub(%0, %3) : f32
    %5 = scheduled.mul(%4, %4) : f32
    %6 = scheduled.reduction(%5) {reduction_type = "sum"} : f32
    %7 = scheduled.truediv(%6, %2) : f32
    scheduled.store(%buf0, p0, %7)""",
    ),
)


@pytest.mark.parametrize("pipeline", ["to-triton", "to-triton{persistent-max=8,max-r-block=16}"])
def test_two_pass_var(pipeline):
    _, mod = compile_graph(VAR, pipeline)
    x = torch.randn(5, 40)
    torch.testing.assert_close(mod.call([x])[0], x.var(-1, unbiased=False))


CHAIN = """scheduled.graph @g(%arg0_1: f32[256][1]cpu) {
  %buf0 = scheduled.node @op0 {sizes = ([256], []), device = cpu, origins = ["add"], writes = [(%buf0, c0, {c0: 256})], met = [], unmet = []} : f32[256][1]cpu {
    %0 = scheduled.load(%arg0_1, p0) : f32
    %1 = scheduled.exp(%0) : f32
    scheduled.store(%buf0, p0, %1)
  }
  %buf1 = scheduled.extern @aten.cumsum.default(%buf0, 0) {origins = ["cumsum"], writes = [(%buf1, c0, {c0: 256})], met = [], unmet = []} : f32[256][1]cpu
  %buf2 = scheduled.node @op2 {sizes = ([256], []), device = cpu, origins = ["mul"], writes = [(%buf2, c0, {c0: 256})], met = [], unmet = []} : f32[256][1]cpu {
    %0 = scheduled.load(%buf1, p0) : f32
    %1 = scheduled.constant(2.0) : f32
    %2 = scheduled.mul(%0, %1) : f32
    scheduled.store(%buf2, p0, %2)
  }
  scheduled.output(%buf2)
}
"""


@pytest.mark.parametrize(
    "pipeline, taken",
    [
        ("to-triton{in-place=false}", "%buf0"),  # buf0 is dead once cumsum read it: the pool's
        ("to-triton", "%buf1"),  # the mul reads the cumsum where it writes: in place
    ],
)
def test_extern_and_buffer_reuse(pipeline, taken):
    printed, mod = compile_graph(CHAIN, pipeline)
    assert "%buf1 = triton.extern @aten.cumsum.default(%buf0, 0)" in printed
    assert f"%buf2 = triton.reuse({taken})" in printed
    x = torch.randn(256)
    torch.testing.assert_close(mod.call([x])[0], torch.cumsum(x.exp(), 0) * 2)


def test_an_input_the_caller_dropped_is_freed_after_its_last_use():
    """`call` takes its argument list (it clears it), and frees each input after its last use:
    a backward's saved activations go as it runs, not when it returns."""
    _, mod = compile_graph(CHAIN)
    x = torch.randn(256)
    want = torch.cumsum(x.exp(), 0) * 2
    alive = weakref.ref(x)
    args = [x]
    del x
    seen = []
    launch = mod.triton_poi_fused_mul_1_launch  # after the input's last use (the exp)

    def observed(*a):
        seen.append(alive() is None)
        launch(*a)

    mod.triton_poi_fused_mul_1_launch = observed
    torch.testing.assert_close(mod.call(args)[0], want)
    assert args == [] and seen == [True]


def test_online_softmax_needs_the_same_value():
    # the sum reads the row reversed: the same sum, but not structurally the max's input
    text = fused_softmax(False).replace(
        "%2 = scheduled.load(%arg0_1, 100*p0 + p1)",
        "%2 = scheduled.load(%arg0_1, 100*p0 - p1 + 99)",
    )
    printed, mod = compile_graph(text, "online-softmax,to-triton{persistent-max=16,max-r-block=32}")
    assert printed.count("triton.for") == 3
    x = torch.randn(6, 100)
    torch.testing.assert_close(mod.call([x])[0], x.softmax(-1))


MOD = graph(
    "%arg0_1: i64[6][1]cpu, %arg1_1: i64[6][1]cpu",
    node(
        "([6], [])",
        '["mod"]',
        "i64[6][1]cpu",
        "[(%buf0, c0, {c0: 6})]",
        """    %0 = scheduled.load(%arg0_1, p0) : i64
    %1 = scheduled.load(%arg1_1, p0) : i64
    %2 = scheduled.mod(%0, %1) : i64
    scheduled.store(%buf0, p0, %2)""",
    ),
)


def test_mod_takes_the_divisors_sign():
    """`mod` is Python's (sympy's Mod, torch.remainder), not C's truncating `%`. The interpreter's
    numpy `%` already floors, so the emitted text is checked too: compiled Triton's `%` truncates."""
    assert "triton_helpers.remainder(tmp" in emit(run_pipeline(parse(MOD), "to-triton"))
    _, mod = compile_graph(MOD)
    a, b = torch.tensor([7, -7, 7, -7, 0, 5]), torch.tensor([3, 3, -3, -3, 2, -5])
    assert mod.call([a, b])[0].tolist() == torch.remainder(a, b).tolist()


def test_a_cast_to_bf16_rounds_to_nearest_even():
    """As compiled Triton and torch do (the interpreter alone truncates): ties go to the even
    value, a carry past bf16's largest finite value gives inf, NaN stays NaN."""
    from programs import no_fallback

    ulp = 2.0**-7
    x = torch.tensor(
        [1 + ulp / 2, 1 + 3 * ulp / 2, -8.4375 - 1e-4, 3.3961e38, float("nan"), float("-inf"), 0.0]
    )
    x = torch.cat([x, torch.randn(256) * 100])
    torch._dynamo.reset()
    with no_fallback():
        got = torch.compile(lambda x: x.bfloat16(), backend="mind")(x)
    torch.testing.assert_close(got, x.bfloat16(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    "dtype",
    [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.float64],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # numpy's, making f16's inf
def test_a_cast_to_bf16_from_any_dtype_is_torchs(dtype):
    """Through f32, as torch converts: the interpreter wrote an integer's or an f64's value as
    inf). Values past f32's precision and bf16's range round as torch rounds them, f64 ones to
    f16 twice too (535.74998 to 536 through f32's 535.75, not to 535.5 at once)."""
    from programs import no_fallback

    x = torch.tensor([6.5, -1.25, 300.0, 0.0, 257.0, 16777217.0, 1e30, 3.3961e38, -1e300])
    twice = torch.tensor([535.7499797037141, 1572.5000468285843], dtype=torch.float64)
    x = torch.cat([x.double(), twice, torch.randn(64, dtype=torch.float64) * 1000])
    if not dtype.is_floating_point:
        x = x.clamp(-(2**62), 2**62) if dtype == torch.int64 else x.remainder(100) - 50
    x = x.to(dtype)
    torch._dynamo.reset()
    with no_fallback():
        got = torch.compile(lambda x: (x.bfloat16(), x.to(torch.float16)), backend="mind")(x)
    for g, w in zip(got, (x.bfloat16(), x.to(torch.float16))):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


def test_repeated_layers_share_one_kernel(tmp_path, monkeypatch):
    """Three identical layers (matmul, then relu, scale and softmax fused): one kernel, compiled
    and bound once, launched three times; eager's numbers."""
    import re

    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    def layers(x, ws):
        for w in ws:
            x = torch.softmax(torch.relu(x @ w) * 2 + 1, -1)
        return x

    x, ws = torch.randn(8, 16), [torch.randn(16, 16) for _ in range(3)]
    torch.testing.assert_close(torch.compile(layers, backend="mind")(x, ws), layers(x, ws))
    (source,) = [p.read_text() for p in tmp_path.glob("*_forward.*.py")]
    assert source.count("@triton.jit") == 1
    assert len(re.findall(r"^\w+_launch = bind\(", source, re.M)) == 1
    assert len(re.findall(r"^\s+\w+_launch\(", source, re.M)) == 3


ROW_PHASES = """scheduled.graph @g(%arg0_1: f32[4, 32][32, 1]cpu) {
  %buf0 = scheduled.node @op0 {sizes = ([128], []), device = cpu, origins = ["exp"], writes = [(%buf0, c0, {c0: 128})], unmet = [], met = []} : f32[4, 32][32, 1]cpu {
    %0 = scheduled.load(%arg0_1, p0) : f32
    %1 = scheduled.exp(%0) : f32
    scheduled.store(%buf0, p0, %1)
  }
  %buf1, %buf2 = scheduled.node @op1 {sizes = ([4], [32]), device = cpu, origins = ["mul", "div"], writes = [(%buf1, 32*c0 + c1, {c0: 4, c1: 32}), (%buf2, 32*c0 + c1, {c0: 4, c1: 32})], unmet = [], met = []} : f32[4, 32][32, 1]cpu, f32[4, 32][32, 1]cpu {
    %0 = scheduled.load(%buf0, 32*p0 + p1) : f32
    %1 = scheduled.constant(2.0) : f32
    %2 = scheduled.mul(%0, %1) : f32
    scheduled.store(%buf1, 32*p0 + p1, %2)
    %3 = scheduled.reduction(%0) {reduction_type = "sum"} : f32
    %4 = scheduled.truediv(%0, %3) : f32
    scheduled.store(%buf2, 32*p0 + p1, %4)
  }
  scheduled.output(%buf1, %buf2)
}
"""


@pytest.mark.parametrize("pipeline", ["to-triton", "to-triton{persistent-max=8,max-r-block=8}"])
def test_a_row_written_in_place_over_its_input_reads_it_first(pipeline):
    """The normalized row takes over exp(x)'s buffer: in a looped kernel the last r-loop reads
    each element before writing it. The doubled row, stored in the first loop, keeps a buffer of
    its own (over exp(x), the last loop would read doubled values)."""
    printed, mod = compile_graph(ROW_PHASES, pipeline)
    assert "%buf1 = triton.empty_strided((4, 32), (32, 1))" in printed
    assert "%buf2 = triton.reuse(%buf0)" in printed
    x = torch.randn(4, 32)
    doubled, normalized = mod.call([x])
    torch.testing.assert_close(doubled, x.exp() * 2)
    torch.testing.assert_close(normalized, x.exp() / x.exp().sum(1, keepdim=True))
