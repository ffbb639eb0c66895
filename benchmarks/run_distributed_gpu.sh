#!/usr/bin/env bash
# On a machine with several GPUs (no network): install the carried wheels and mind, run the
# distributed tests marked gpu, then benchmarks.distributed on every GPU (torchrun, NCCL), writing
# distributed_h200.{json,md} and the logs to $OUT. Arguments are passed on after the defaults:
# `benchmarks/run_distributed_gpu.sh --size gpt2 --strategies ddp,fsdp2 --steps 10`.
set -uo pipefail
source "$(dirname "$0")/gpu_setup.sh"
python3 -m pytest -q -p no:warnings -m gpu tests/test_distributed.py 2>&1 | tail -20 \
  | tee "$OUT/distributed_tests.log"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
torchrun --standalone --nproc-per-node "$gpus" -m benchmarks.distributed \
  --json "$OUT/distributed_h200.json" --md "$OUT/distributed_h200.md" "$@" \
  2>"$OUT/distributed.log"
tail -5 "$OUT/distributed.log"
