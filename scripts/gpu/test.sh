#!/usr/bin/env bash
# After scripts/gpu/build.sh: the checks of a GPU machine, most wanted first, logs and figures into one
# folder (OUT_DIR, else $OUT, else gpu-results/). Exits non-zero if any part failed or was cut short.
#   scripts/gpu/test.sh [OUT_DIR]
# The parts (ACC_GPU_PARTS, in the order given; default all, in this order):
#   gpu             the GPU tests (CTest label gpu)
#   bench           bench/gpu: the GPT-2-small decoder (plain libtorch, the C API, Python Accelerate)
#                   and the Fashion-MNIST job
#   cpu             the whole CTest suite with the GPU hidden: every CPU test, on this libtorch
#   sidebyside-cuda training next to this machine's Python Accelerate on the GPU, step by step
#                   (tests/sidebyside; the scenarios in ACC_GPU_SIDEBYSIDE, default those below)
#   sidebyside-cpu  the same on the CPU, every scenario on 1 and 2 processes (long)
# ACC_GPU_DEADLINE (seconds since the epoch): each part runs under `timeout` until then, and a part
# with less than its minimum left is recorded as skipped; unset, parts run without a limit.
# Each part's outcome is one line of OUT_DIR/parts.tsv (name, passed/failed/timed-out/skipped, seconds).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${1:-${OUT:-gpu-results}}
mkdir -p "$out"
: > "$out/parts.tsv"
status=0
parts=${ACC_GPU_PARTS:-gpu bench cpu sidebyside-cuda sidebyside-cpu}
# Scenarios that tell most on a GPU: every model, both 16-bit precisions, accumulation with clipping
# (fp16: unscaled first), fused optimizers, a sequence of schedules, a resume, a handover to Accelerate
# and a takeover from it (its scaler.pt read).
sidebyside_cuda=${ACC_GPU_SIDEBYSIDE:-mlp mlp_bf16 mlp_fp16 lm_fp16_accumulate_clip lm_bf16_accumulate cnn_batchnorm
  mlp_accumulate_clip lm_adamw_fused_accumulate_clip mlp_sgd_fused_bf16 mlp_sequential mlp_resume mlp_fp16_handover
  mlp_fp16_takeover}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11abi",
    torch._C._GLIBCXX_USE_CXX11_ABI, "gpus", torch.cuda.device_count())'
  "$python" -c 'import accelerate; print("accelerate", accelerate.__version__)' 2>&1 | tail -1
  echo "cores $(nproc)"
  "$build/accelerate" env 2>&1 | head -40
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

jobs=$(($(nproc) > 12 ? 12 : $(nproc)))

# part NAME MIN_SECONDS LOG CMD...: CMD's output into OUT_DIR/LOG, within what is left before the
# deadline (not started with less than MIN_SECONDS left); its outcome into parts.tsv.
part() {
  local name=$1 min=$2 log=$out/$3 limit=() result
  shift 3
  if [ -n "${ACC_GPU_DEADLINE:-}" ]; then
    local left=$((ACC_GPU_DEADLINE - $(date +%s)))
    if [ "$left" -lt "$min" ]; then
      printf '%s\tskipped\t0\t%s s left, %s needed\n' "$name" "$left" "$min" >> "$out/parts.tsv"
      echo "test: $name skipped: $left s left"
      status=1
      return
    fi
    limit=(timeout --kill-after=10 "$left")
  fi
  local start=$SECONDS
  echo "test: $name ($(date -u +%T))"
  "${limit[@]}" "$@" 2>&1 | tee -a "$log"
  case ${PIPESTATUS[0]} in
    0) result=passed ;;
    124 | 137) result=timed-out ;;
    *) result=failed ;;
  esac
  [ "$result" = passed ] || status=1
  printf '%s\t%s\t%s\t%s\n' "$name" "$result" $((SECONDS - start)) "${log##*/}" >> "$out/parts.tsv"
}

for p in $parts; do
  case $p in
    # --verbose: a passing test's figures (memory given back, peak GPU memory per stage) are in its output.
    gpu) part gpu 60 ctest-gpu.log ctest --test-dir "$build" -L gpu --verbose ;;
    bench)
      [ -x "$build/bench/bench_gpu" ] || { printf 'bench\tfailed\t0\tno bench_gpu\n' >> "$out/parts.tsv"; status=1; continue; }
      # The benchmark keeps to its own budget: what is left before the deadline, less a margin.
      [ -n "${ACC_GPU_DEADLINE:-}" ] && export ACC_BENCH_GPU_BUDGET_S=$((ACC_GPU_DEADLINE - $(date +%s) - 20))
      part bench 90 bench-gpu.log bash bench/gpu/run.sh "$build" "$python" "$out/bench" ;;
    cpu)
      part cpu 60 ctest-cpu.log env CUDA_VISIBLE_DEVICES="" ctest --test-dir "$build" -LE gpu -j "$jobs" \
        --output-on-failure ;;
    sidebyside-cuda)
      # shellcheck disable=SC2086  # the scenario list splits into words
      part sidebyside-cuda 45 sidebyside-cuda.log env ACC_PYTHON="$python" ACC_SIDE_BY_SIDE_DEVICE=cuda \
        bash tests/sidebyside/run.sh "$build" "$out/sidebyside-cuda" $sidebyside_cuda ;;
    sidebyside-cpu)
      part sidebyside-cpu 60 sidebyside-cpu.log env ACC_PYTHON="$python" ACC_SIDE_BY_SIDE_DEVICE=cpu \
        bash tests/sidebyside/run.sh "$build" "$out/sidebyside-cpu" ;;
    *) echo "test: no part '$p' (gpu bench cpu sidebyside-cuda sidebyside-cpu)" >&2; exit 2 ;;
  esac
done
column -t -s $'\t' "$out/parts.tsv" 2>/dev/null || cat "$out/parts.tsv"
echo "test: done, status $status, results in $out"
exit $status
