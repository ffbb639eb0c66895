#!/usr/bin/env bash
# On the GPU machine (no network): install the carried wheels (.whl: lark, filecheck, lit) and mind,
# then run the GPU-marked tests and the benchmark, writing logs and JSON to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu_setup.sh"
export MIND_CACHE_DIR="$OUT/cache"
python3 -m pytest -q -p no:warnings -m gpu tests/ "$@" 2>&1 | tail -40 | tee "$OUT/gpu_tests.log"
python3 -m benchmarks.run --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
rm -rf "$OUT/cache"
