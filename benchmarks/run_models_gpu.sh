#!/usr/bin/env bash
# On the GPU machine (no network): install the carried wheels and mind (transformers, timm,
# torchvision and matplotlib are there already), then run the model benchmark, writing
# models_h200.{json,md,png} and its log to $OUT. Arguments are passed on after the defaults:
# `benchmarks/run_models_gpu.sh --models gpt2,bert --dtypes bf16 --jobs 4`.
set -uo pipefail
source "$(dirname "$0")/gpu_setup.sh"
# --deadline leaves room in a 10-minute command for the installs and the final tables.
python3 -m benchmarks.models --jobs 8 --timeout 240 --deadline 480 \
  --json "$OUT/models_h200.json" --md "$OUT/models_h200.md" --png "$OUT/models_h200.png" "$@" \
  2>"$OUT/models.log"
tail -5 "$OUT/models.log"
