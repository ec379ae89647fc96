#!/usr/bin/env bash
# After scripts/gpu/build.sh: runs the whole CTest suite with the GPU hidden (every CPU test, on
# this libtorch), then the GPU tests (CTest label gpu), then training next to Python Accelerate
# (tests/sidebyside), then the GPU benchmark; writes the logs and
# figures into one folder: OUT_DIR, else $OUT, else gpu-results/. Exits non-zero if any part failed.
#   scripts/gpu/test.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${1:-${OUT:-gpu-results}}
mkdir -p "$out"
status=0

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11abi",
    torch._C._GLIBCXX_USE_CXX11_ABI, "gpus", torch.cuda.device_count())'
  nproc
  "$build/accelerate" env 2>&1 | head -40
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

jobs=$(( $(nproc) > 8 ? 8 : $(nproc) ))
CUDA_VISIBLE_DEVICES="" ctest --test-dir "$build" -LE gpu -j "$jobs" --output-on-failure 2>&1 | tee "$out/ctest-cpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
ctest --test-dir "$build" -L gpu --output-on-failure 2>&1 | tee "$out/ctest-gpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# Python Accelerate (this machine's) next to the C API, step by step: on the CPU on 1 and 2
# processes, then on the GPU (tests/sidebyside).
for device in cpu cuda; do
  ACC_PYTHON="$python" ACC_SIDE_BY_SIDE_DEVICE=$device bash tests/sidebyside/run.sh "$build" "$out/sidebyside-$device" 2>&1 |
    tee -a "$out/sidebyside.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
if [ -x "$build/bench/bench_gpu" ]; then
  bash bench/gpu/run.sh "$build" "$python" "$out" 2>&1 | tee "$out/bench-gpu.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
echo "test: done, status $status, results in $out"
exit $status
