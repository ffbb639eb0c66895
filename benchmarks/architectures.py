"""Architectures beyond the model benchmark's five, compiled by mind and checked: a coverage sweep
over transformers', timm's and torchvision's models at small sizes, random weights (nothing
downloads), as a user would first try mind on their own model.

    python3 -m benchmarks.architectures [--device cpu] [--dtype fp32] [--modes infer,train,resize]
        [--only gpt2,resnet50,...] [--jobs N] [--timeout S] [--json F] [--md F]

Modes: `infer` (no grad), `train` (one step: forward, `model_row.loss`, backward) and `resize`
(inference at one size, then at another: Dynamo recompiles with the sizes symbolic, as it does
for a user whose batch or sequence length changes). Each row runs in a fresh process (an error,
hang or crash ends that row only) and reports: pass, mismatch (the check), fallback (mind ran a
graph eagerly: the reason), error (compiled code raised), eager (the model, or its fp64
reference, does not run here: skipped) or timeout. The check is the model benchmark's: the
compiled step's RMS error against an fp64 run of the same weights and inputs is at most
`model_row.MULTIPLIER` times eager's, per tensor (output and each gradient). Lives in
benchmarks/ beside benchmarks/opinfo.py, the same sweep over single operators: it measures
coverage, it is not a test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/architectures.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.common import catch_fallbacks, describe, names_arg, write_outputs  # noqa: E402
from benchmarks.model_row import (  # noqa: E402
    DTYPES,
    Snapshot,
    Task,
    check,
    reference,
    snapshot,
    stepper,
    verdict,
)

MODES = ("infer", "train", "resize")
#: a transformers model's size: every config takes these (through its attribute map)
TEXT = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
    vocab_size=256, max_position_embeddings=128, pad_token_id=0, bos_token_id=0, eos_token_id=0,
)  # fmt: skip
#: token batches (batch, sequence) by device, and the other size of `resize`
TOKENS = {"cpu": ((2, 16), (3, 24)), "cuda": ((8, 128), (6, 96))}
#: images are square: this side by device (a model may fix its own), and `resize` adds RESIZE
IMAGE, RESIZE = {"cpu": 64, "cuda": 128}, 32


@dataclass(frozen=True)
class Arch:
    """One architecture: where it comes from and how it is made small."""

    library: str  # transformers | timm | torchvision
    name: str  # model type (transformers), or the library's model name
    config: dict = field(default_factory=dict)  # transformers: config beyond TEXT
    image: int | None = None  # a vision model's fixed input side


def _text(name: str, **config) -> Arch:
    return Arch("transformers", name, config)


def _vision(library: str, names: str, image: int | None = None) -> list[Arch]:
    return [Arch(library, n, image=image) for n in names.split()]


CATALOG: dict[str, Arch] = {
    a.name: a
    for a in (
        _text("bert"), _text("roberta"), _text("albert", embedding_size=32),
        _text("electra", embedding_size=32), _text("deberta-v2"), _text("mpnet"),
        _text("distilbert", dim=64, n_layers=2, n_heads=4, hidden_dim=128),
        _text("mobilebert", embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32,
              num_feedforward_networks=2),
        _text("gpt2"), _text("gpt_neox"), _text("opt", ffn_dim=128, word_embed_proj_dim=64),
        _text("gpt_neo", attention_types=[[["global", "local"], 1]], num_layers=2, window_size=8),
        _text("gptj", rotary_dim=8), _text("bloom"), _text("falcon"), _text("phi"),
        _text("llama", num_key_value_heads=2), _text("mistral", num_key_value_heads=2,
              sliding_window=8),
        _text("qwen2", num_key_value_heads=2), _text("qwen3", num_key_value_heads=2, head_dim=16),
        _text("gemma", num_key_value_heads=2, head_dim=16), _text("stablelm", num_key_value_heads=2),
        _text("olmo", num_key_value_heads=2),
        _text("mixtral", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
        _text("t5", d_model=64, num_layers=2, num_heads=4, d_ff=128, d_kv=16),
        _text("bart", d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
        *_vision("torchvision", "resnet50 resnext50_32x4d mobilenet_v2 mobilenet_v3_small"
                 " efficientnet_b0 efficientnet_v2_s convnext_tiny densenet121 squeezenet1_1"
                 " shufflenet_v2_x0_5 regnet_y_400mf mnasnet0_5 googlenet vgg11_bn alexnet"),
        *_vision("torchvision", "swin_t vit_b_16 maxvit_t", 224),
        *_vision("timm", "ghostnet_100 rexnet_100 dla34 mobilevit_xxs edgenext_xx_small fastvit_t8"
                 " repvit_m1 mobilenetv4_conv_small dm_nfnet_f0 cspresnet50 hrnet_w18_small"
                 " convnextv2_atto vovnet39a selecsls42b res2net50_14w_8s skresnet18"
                 " hgnetv2_b0 ese_vovnet19b_dw poolformer_s12"),
        *_vision("timm", "deit_tiny_patch16_224 mixer_s16_224 resmlp_12_224 levit_128s"
                 " coat_lite_tiny convit_tiny efficientvit_b0 inception_next_tiny caformer_s18"
                 " eva02_tiny_patch14_224 gcvit_xxtiny xcit_nano_12_p16_224 pvt_v2_b0"
                 " twins_svt_small tiny_vit_5m_224 efficientformerv2_s0 davit_tiny"
                 " focalnet_tiny_srf coatnet_nano_rw_224", 224),
        *_vision("timm", "halonet26t lambda_resnet26t botnet26t_256 maxvit_nano_rw_256", 256),
    )
}  # fmt: skip


def build(arch: Arch, device: str, dtype: torch.dtype) -> nn.Module:
    """The model on `device`, from one seed, dropout off (a training step is deterministic)."""
    torch.manual_seed(0)
    module = _text_model(arch) if arch.library == "transformers" else _vision_model(arch)
    for m in module.modules():
        if any(word in type(m).__name__ for word in ("Drop", "Stochastic")):
            for attr in ("p", "drop_prob"):
                if isinstance(getattr(m, attr, None), float):
                    setattr(m, attr, 0.0)
    return module.to(device=device, dtype=dtype)


def inputs(arch: Arch, device: str, dtype: torch.dtype, resized: bool = False) -> tuple:
    """The model's inputs on `device`, from one seed; `resized`: `resize`'s second ones."""
    gen = torch.Generator().manual_seed(1)
    if arch.library == "transformers":
        ids = torch.randint(0, TEXT["vocab_size"], TOKENS[device][resized], generator=gen)
        return (ids.to(device),)
    side = (arch.image or IMAGE[device]) + RESIZE * resized
    images = torch.randn(3 if resized else 2, 3, side, side, generator=gen)
    return (images.to(device, dtype),)


class _EncoderDecoder(nn.Module):
    """An encoder-decoder called with its decoder's tokens too (the first half of the input's)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor):
        return self.model(input_ids=ids, decoder_input_ids=ids[:, : ids.shape[1] // 2])


def _text_model(arch: Arch) -> nn.Module:
    import transformers

    config = transformers.AutoConfig.for_model(arch.name, **{**TEXT, **arch.config})
    for name, value in config.to_dict().items():
        if "dropout" in name or name.endswith("_pdrop"):
            if isinstance(value, float):
                setattr(config, name, 0.0)
    model = transformers.AutoModel.from_config(config)
    return _EncoderDecoder(model) if config.is_encoder_decoder else model


def _vision_model(arch: Arch) -> nn.Module:
    if arch.library == "timm":
        import timm

        return timm.create_model(arch.name, pretrained=False, num_classes=10)
    import torchvision

    extra: dict = {"aux_logits": False, "init_weights": False} if arch.name == "googlenet" else {}
    if arch.name.startswith("vit_"):
        extra["image_size"] = arch.image
    return torchvision.models.get_model(arch.name, weights=None, num_classes=10, **extra)


#: which of `inputs` a mode runs: `resize` both
_SIZES = {"infer": (False,), "train": (False,), "resize": (False, True)}


def run_row(
    name: str, mode: str, device: str, dtype: str, backend: str | Callable = "mind"
) -> dict[str, object]:
    """One architecture in one mode under `backend` (torch.compile's): its status, the check's
    worst ratio, its fallbacks or failed checks, and seconds (compiles and the calls checked).
    Never raises."""
    row: dict[str, object] = {"arch": name, "mode": mode}
    arch = CATALOG[name]
    task = Task(name, dtype, "train" if mode == "train" else "infer", "mind", device, True)
    try:
        module = build(arch, device, DTYPES[dtype])
        sizes = [inputs(arch, device, DTYPES[dtype], resized) for resized in _SIZES[mode]]
        module.train(task.mode == "train")
        wanted = [_wanted(task, module, x) for x in sizes]
    except Exception as exc:  # noqa: BLE001  (the model or its reference does not run: skipped)
        return {**row, "status": "eager", "why": describe(exc)}
    fallbacks: list[str] = []
    fn = torch.compile(module, backend=backend)
    start = time.perf_counter()
    try:
        with catch_fallbacks(fallbacks):
            got = [snapshot(module, stepper(task, module, fn, x)) for x in sizes]
    except Exception as exc:  # noqa: BLE001
        return {**row, "status": "error", "why": describe(exc)}
    row["seconds"] = round(time.perf_counter() - start, 1)
    try:
        reports = [
            check(_reached(g, eager), eager, truth, DTYPES[dtype])
            for g, (eager, truth) in zip(got, wanted)
        ]
    except AssertionError as exc:  # gradients where eager has none
        return {**row, "status": "mismatch", "why": describe(exc)}
    failed = [why for ok, why in map(verdict, reports) if not ok]
    row["ratio"] = max(r.get(k, 0.0) for r in reports for k in ("out_ratio", "grad_ratio"))
    status = "fallback" if fallbacks else "mismatch" if failed else "pass"
    return {**row, "status": status, "why": "; ".join(fallbacks or failed)}


def _reached(got: Snapshot, eager: Snapshot) -> Snapshot:
    """`got` less the zero gradients of parameters eager's loss does not reach (BERT's pooler,
    whose output the loss leaves out): AOTAutograd's backward returns zeros for them where eager
    leaves None, under Inductor as under mind."""
    return {k: v for k, v in got.items() if k in eager or bool(v.any())}


def _wanted(task: Task, module: nn.Module, inputs: tuple):
    """Eager's snapshot of one step, and the fp64 reference's."""
    return snapshot(module, stepper(task, module, module, inputs)), reference(task, module, inputs)


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    counts = Counter(r["status"] for r in rows)
    lines = [
        f"# Architectures under mind ({args.device}, {args.dtype})",
        "",
        ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        "",
        "| architecture | mode | status | ratio | seconds | why |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in rows:
        ratio = f"{r['ratio']:.2g}" if isinstance(r.get("ratio"), float) else "-"
        why = str(r.get("why", "")).replace("|", "\\|")
        lines.append(
            f"| {r['arch']} | {r['mode']} | {r['status']} | {ratio} | {r.get('seconds', '-')}"
            f" | {why} |"
        )
    return "\n".join(lines) + "\n"


def _in_fresh_process(args: argparse.Namespace) -> Callable[[tuple[str, str]], dict]:
    """Runs a row in a fresh process, at most `--timeout` seconds."""

    def run(item: tuple[str, str]) -> dict:
        name, mode = item
        command = [sys.executable, "-m", "benchmarks.architectures", "--row", name, mode,
                   "--device", args.device, "--dtype", args.dtype]  # fmt: skip
        root = Path(__file__).resolve().parent.parent
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=args.timeout, cwd=root
            )
        except subprocess.TimeoutExpired:
            return {"arch": name, "mode": mode, "status": "timeout"}
        rows = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if rows:
            return json.loads(rows[-1])
        return {"arch": name, "mode": mode, "status": "error", "why": done.stderr[-500:]}

    return run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.architectures", description=__doc__.splitlines()[0]
    )
    p.add_argument("--only", type=names_arg(list(CATALOG)), default=list(CATALOG))
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--dtype", default="fp32", choices=list(DTYPES))
    p.add_argument("--jobs", type=int, default=1, help="rows at once, each in its own process")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per row")
    p.add_argument("--json", help="write the rows and settings here")
    p.add_argument("--md", help="write the Markdown here (it also goes to stdout)")
    p.add_argument("--row", nargs=2, metavar=("ARCH", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be 1 or more")
    if args.row and (args.row[0] not in CATALOG or args.row[1] not in MODES):
        p.error(f"--row: unknown {args.row}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.row:  # a worker: one row, as a JSON line
        print(json.dumps(run_row(*args.row, args.device, args.dtype)), flush=True)
        return
    todo = [(name, mode) for name in args.only for mode in args.modes]
    run = _in_fresh_process(args)
    position = {item: i for i, item in enumerate(todo)}
    rows: list[dict] = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        # each row written as it ends, in the catalog's order: a run cut short keeps them all
        futures = [pool.submit(run, item) for item in todo]
        for done in concurrent.futures.as_completed(futures):
            row = done.result()
            rows.append(row)
            rows.sort(key=lambda r: position[r["arch"], r["mode"]])
            print(f"{row['arch']} {row['mode']}: {row['status']}", file=sys.stderr, flush=True)
            write_outputs(rows, args, markdown)
    print(markdown(rows, args))


if __name__ == "__main__":
    main()
