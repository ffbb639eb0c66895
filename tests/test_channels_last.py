"""Layout optimization for convolution nets (passes/channels_last.py): a small residual conv net
compiled by mind equals eager, for inference and for a training step, with its activations
channels-last from convolution to convolution (the backward compiled for the layouts its
forward saved); `layout_optimization=False` leaves the pass out. On a GPU:
test_gpu_channels_last.py."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from mind.dialects.loops import LoopsCall, Pointwise
from mind.passes import run_pipeline
from mind.passes.channels_last import channels_last_strides
from programs import conv_net, no_fallback
from torch.fx.experimental.proxy_tensor import make_fx

import mind
from mind import MindFallbackWarning, backend
from mind.compiled import laid_out
from mind.options import PIPELINE, pipeline_of, resolve_options

#: the default pipeline with the rule skipped: what the tests check must not depend on whether
#: this machine's torch has oneDNN (which turns the rule on for CPU convolutions)
FORCED = PIPELINE.replace("channels-last", "channels-last{force=true}")


def compiled_inference(options: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """`conv_net` in eval mode compiled by mind with `options` and run, and eager's output."""
    net, x = conv_net()
    net.eval()
    with torch.no_grad(), no_fallback():
        return torch.compile(net, backend="mind", options=options)(x), net(x)


def test_the_buffers_between_convolutions_are_channels_last():
    net, x = conv_net()
    with torch.no_grad():
        aten = mind.capture(net.eval(), x, stage="aten")
    graph = run_pipeline(aten, "channels-last{force=true},lower,realize").ops[0].body
    convs = [op for op in graph.ops if isinstance(op, LoopsCall)]
    assert [c.symbol for c in convs] == ["aten.convolution.default"] * 2
    for conv in convs:
        image, weight = conv.input_strides[:2]
        assert tuple(image) == channels_last_strides(conv.args[0].type.shape)
        assert tuple(weight) == channels_last_strides(conv.args[1].type.shape)
        assert conv.result.type.strides == channels_last_strides(conv.result.type.shape)
    # the second convolution reads what the kernel after the first wrote, converted by nothing
    assert convs[1].args[0].owner.origins == ["relu"]
    copies = [
        op for op in graph.ops if isinstance(op, Pointwise) and op.origins == ["copy_strided"]
    ]
    assert len(copies) == 4  # the image, the two weights, and the output back to eager's strides


def test_a_convolutions_bias_is_an_add_that_fuses_into_the_next_kernel(
    isolated_runtime, tmp_path, monkeypatch
):
    """The library convolution runs without its bias (cuDNN would add it in a kernel of its
    own); the add is a pointwise op, read by the kernel of the norm and relu after it."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    got, want = compiled_inference({"pipeline": FORCED})
    torch.testing.assert_close(got, want)
    aten = (tmp_path / "graph0_forward.00.aten").read_text()
    assert "%convolution = aten.convolution.default(%arg2_1, %arg0_1, none," in aten
    assert "%view = aten.view.default(%arg1_1, [-1, 1, 1])" in aten
    assert "%add = aten.add.Tensor(%convolution, %view)" in aten
    (source,) = [p.read_text() for p in tmp_path.glob("graph0_forward.*.py")]
    assert "buf2 = aten_convolution_default(buf0, buf1, None," in source
    norm = next(line for line in source.splitlines() if "buf2, arg1_1" in line)
    assert re.search(r"triton_poi_fused_\w*add\w*relu\w*_launch", norm), norm


def test_ops_alike_are_typed_on_fake_tensors_once(monkeypatch):
    """An op retyped for a changed layout runs on fake tensors once per signature: compiling
    the net again runs none; what it made is what the first compile made."""
    from mind.passes import channels_last

    net, x = conv_net()
    with torch.no_grad():
        text = str(mind.capture(net.eval(), x, stage="aten"))
    runs = []
    run_fake = channels_last.Relayout._run_fake
    monkeypatch.setattr(
        channels_last.Relayout, "_run_fake", lambda self, op: runs.append(op) or run_fake(self, op)
    )
    monkeypatch.setattr(channels_last, "_TYPED", {})
    first = str(run_pipeline(mind.parse(text), "channels-last{force=true}"))
    assert runs and len(runs) == len(set(map(id, runs)))
    count = len(runs)
    assert str(run_pipeline(mind.parse(text), "channels-last{force=true}")) == first
    assert len(runs) == count


def test_inference_matches_eager(isolated_runtime):
    got, want = compiled_inference({"pipeline": FORCED})
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()


def test_training_step_matches_eager_and_the_backward_takes_channels_last(
    isolated_runtime, tmp_path, monkeypatch
):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    net, x = conv_net()
    reference = copy.deepcopy(net)
    with no_fallback():
        got = torch.compile(net, backend="mind", options={"pipeline": FORCED})(x)
        got.square().sum().backward()
    want = reference(x)
    want.square().sum().backward()
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    for (name, param), ref in zip(net.named_parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad, ref.grad, msg=name, rtol=1e-4, atol=1e-4)
        assert param.grad.stride() == ref.grad.stride(), name
    torch.testing.assert_close(net.bn.running_mean, reference.bn.running_mean)
    torch.testing.assert_close(net.bn.running_var, reference.bn.running_var)
    # the forward saves its activations channels-last, and the backward is compiled for them
    forward = (tmp_path / "graph0_forward.01.channels-last.aten").read_text()
    assert re.search(r"aten.output\(.*\) \{flexible = \[\d", forward)
    backward = (tmp_path / "graph0_backward.00.aten").read_text().splitlines()[0]
    assert "%convolution: f32[2, 16, 8, 8][1024, 1, 128, 16]cpu" in backward
    assert "%relu: f32[2, 16, 8, 8][1024, 1, 128, 16]cpu" in backward


def test_the_option_turns_it_off(isolated_runtime, tmp_path, monkeypatch):
    off = {"layout_optimization": False}
    assert "channels-last" not in pipeline_of(resolve_options(options=off))
    assert "channels-last" in pipeline_of(resolve_options())
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    got, want = compiled_inference(off)
    torch.testing.assert_close(got, want)
    assert not list(tmp_path.glob("*channels-last*"))
    realized = next(tmp_path.glob("graph0_forward.*.realize.loops")).read_text()
    assert "copy_strided" not in realized
    assert "input_strides = [[1024, 64, 8, 1]" in realized  # the second conv's input, as traced


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="needs oneDNN")
def test_on_cpu_it_is_on_by_default_as_for_inductor(isolated_runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    net, x = conv_net()
    with torch.no_grad(), no_fallback():
        torch.compile(net.eval(), backend="mind")(x)
    assert "copy_strided" in (tmp_path / "graph0_forward.01.channels-last.aten").read_text()


def test_an_eager_fallback_lays_its_outputs_out_as_reported():
    x = torch.randn(2, 3, 4, 5)
    nhwc = channels_last_strides(tuple(x.shape))
    out, other = laid_out(lambda args: (args[0] + 1, args[0]), (nhwc, None))([x])
    assert out.stride() == nhwc and other is x
    torch.testing.assert_close(out, x + 1)


def test_a_forward_that_falls_back_lays_out_what_its_backward_was_compiled_for(
    isolated_runtime, monkeypatch
):
    """The forward's first call fails: eager runs it, its saved activations laid out as the
    compiled forward reported them (channels-last), so the compiled backward reads them right."""
    real = backend.load_program

    def failing_forward(graph, *args):
        call, key = real(graph, *args)
        if not graph.symbol.endswith("_forward"):
            return call, key

        def broken(args):
            raise RuntimeError("first call failed on purpose")

        broken.output_strides = call.output_strides
        return broken, key

    monkeypatch.setattr(backend, "load_program", failing_forward)
    net, x = conv_net()
    reference = copy.deepcopy(net)
    with pytest.warns(MindFallbackWarning, match="on purpose"):
        got = torch.compile(net, backend="mind", options={"pipeline": FORCED})(x)
    got.square().sum().backward()
    want = reference(x)
    want.square().sum().backward()
    torch.testing.assert_close(got, want)
    for (name, param), ref in zip(net.named_parameters(), reference.parameters()):
        torch.testing.assert_close(param.grad, ref.grad, msg=name, rtol=1e-4, atol=1e-4)


def test_a_backward_given_other_layouts_falls_back_reshaping_its_views(monkeypatch):
    """A backward's inputs come channels-last, and mind cannot compile it: the ATen graph runs,
    reshaping where it views (a view of a channels-last [2, 8, 4, 4] as [2, 128] fails)."""
    aot_gm = make_fx(lambda t: (t.view(2, 128) * 2,), tracing_mode="fake")(torch.empty(2, 8, 4, 4))

    def broken(graph, *args):
        raise RuntimeError("cannot compile on purpose")

    monkeypatch.setattr(backend, "load_program", broken)
    x = torch.randn(2, 8, 4, 4).contiguous(memory_format=torch.channels_last)
    with pytest.warns(MindFallbackWarning, match="on purpose"):
        code = backend.compile_aten_graph(aot_gm, "graph0_backward", [x])
    torch.testing.assert_close(code([x])[0], x.reshape(2, 128) * 2)


def _training_forward_with_statistics(count: int, clones: int = 0) -> str:
    """A training forward of one convolution (96 channels: the training rule says yes),
    `count` var_means of its result, each with both results used, and `clones` copies of it."""
    t, stats = "f32[2, 96, 8, 8][6144, 64, 8, 1]cuda:0", "f32[2, 1, 8, 8][64, 64, 8, 1]cuda:0"
    lines = [
        "aten.graph @g(%primals_1: " + t + ", %primals_2: f32[96, 96, 3, 3][864, 9, 3, 1]cuda:0) {",
        "  %convolution = aten.convolution.default(%primals_1, %primals_2, none, [1, 1], [1, 1],"
        " [1, 1], false, [0, 0], 1) : " + t,
    ]
    for i in range(count):
        lines += [
            f"  %v{i}, %m{i} = aten.var_mean.correction(%convolution, [1]) {{correction = 0,"
            f" keepdim = true}} : {stats}, {stats}",
            f"  %a{i} = aten.add.Tensor(%v{i}, %m{i}) : {stats}",
        ]
    lines += [
        f"  %c{i} = aten.clone.default(%convolution) {{memory_format = @torch.contiguous_format}}"
        f" : {t}"
        for i in range(clones)
    ]
    lines += ["  aten.output(%convolution, %primals_1) {flexible = [1]}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "count, clones, converted", [(60, 0, True), (100, 0, False), (60, 100, True)]
)
def test_the_few_convolutions_rule_counts_nodes_as_fx_does(count, clones, converted):
    """Inductor leaves a graph of 300 FX nodes or more per convolution alone, and FX has a
    getitem node per used result of a var_mean: with 100 of them the graph has 204 ops but 404
    nodes (a ViT's training forward is such a graph, its attention's saved statistics tipping
    it over). Clones are not counted: Inductor's graph has none left by then (a ViT's fp32
    inference graph has 14 clones here, and tipped over with them)."""
    from mind.parser import parse

    text = _training_forward_with_statistics(count, clones)
    out = str(run_pipeline(parse(text), "channels-last"))
    assert ("[6144, 1, 768, 96]" in out) == converted
