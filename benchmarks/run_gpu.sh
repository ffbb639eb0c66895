#!/usr/bin/env bash
# On the GPU machine (no network): install the carried wheels (.whl: lark, filecheck, lit) and mind,
# then run the GPU-marked tests and the benchmark, writing logs and JSON to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/mind-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
export PYTHONUNBUFFERED=1 MIND_CACHE_DIR="$OUT/cache"
python3 -m pytest -q -p no:warnings -m gpu tests/ "$@" 2>&1 | tail -40 | tee "$OUT/gpu_tests.log"
python3 -m benchmarks.run --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
rm -rf "$OUT/cache"
