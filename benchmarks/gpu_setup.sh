# Sourced by the run_*gpu.sh scripts on the GPU machine (no network): from the repository root,
# install the carried wheels (.whl: lark, filecheck, lit) and mind; outputs go to $OUT.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/mind-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
export PYTHONUNBUFFERED=1
