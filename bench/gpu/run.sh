#!/usr/bin/env bash
# The GPU benchmark, end to end (bench/gpu/README.md):
#   bash bench/gpu/run.sh BUILD_DIR PYTHON OUT_DIR
# 1. exports the GPT-2-small decoder with PYTHON (export_gpt.py) into a temporary folder;
# 2. for each precision (bf16, fp16): BUILD_DIR/bench/bench_gpu runs (a) plain libtorch and (b) the C
#    API in one process, then accelerate_gpt.py runs (c) Python Accelerate on the same file and batches;
# 3. the Fashion-MNIST job (BUILD_DIR/examples/fashion_mnist, one epoch) for its samples/s, in fp32,
#    bf16 and fp16;
# 4. writes OUT_DIR/bench-gpu.json (every figure) and OUT_DIR/bench-gpu.md (the table), plus each
#    part's JSON and log beside them.
# Every part runs even when another failed (each failure is recorded); the exit status is non-zero
# if any part failed. Parts share a time budget (ACC_BENCH_GPU_BUDGET_S, 330 s): a part that would
# start past it is recorded as skipped, and each runs under `timeout`.
#
# ACC_BENCH_GPU_TINY=1: the tiny model on the CPU (fp32 and bf16, a few steps, a shortened
# Fashion-MNIST run), to check this script where there is no GPU; there, an Accelerate that is not
# importable is a skip (the script itself is checked with --without-accelerate), not a failure.
# Overrides: ACC_BENCH_GPU_PRECISIONS ("bf16 fp16"), ACC_BENCH_GPU_BATCH (8), ACC_BENCH_GPU_CONTEXT
# (1024), ACC_BENCH_GPU_STEPS (30), ACC_BENCH_GPU_WARMUP (5), ACC_BENCH_GPU_FM_PRECISIONS
# ("no bf16 fp16"), ACC_BENCH_GPU_DEVICE (cuda).
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: bash bench/gpu/run.sh BUILD_DIR PYTHON OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no build folder $1" >&2; exit 2; }
python=$2
mkdir -p "$3" || exit 2
out=$(cd "$3" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-gpu.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

tiny=${ACC_BENCH_GPU_TINY:-0}
if [ "$tiny" = 1 ]; then
  device=cpu
  export_args=(--tiny)
  precisions=${ACC_BENCH_GPU_PRECISIONS:-fp32 bf16}
  batch=${ACC_BENCH_GPU_BATCH:-2}
  context=${ACC_BENCH_GPU_CONTEXT:-32}
  steps=${ACC_BENCH_GPU_STEPS:-2}
  warmup=${ACC_BENCH_GPU_WARMUP:-1}
  fm_precisions=${ACC_BENCH_GPU_FM_PRECISIONS:-no bf16}
  fm_args=(--epochs 1 --train-samples 2000 --test-samples 500)
  export ACCELERATE_USE_CPU=true CUDA_VISIBLE_DEVICES=""
else
  device=${ACC_BENCH_GPU_DEVICE:-cuda}
  export_args=()
  precisions=${ACC_BENCH_GPU_PRECISIONS:-bf16 fp16}
  batch=${ACC_BENCH_GPU_BATCH:-8}
  context=${ACC_BENCH_GPU_CONTEXT:-1024}
  steps=${ACC_BENCH_GPU_STEPS:-30}
  warmup=${ACC_BENCH_GPU_WARMUP:-5}
  fm_precisions=${ACC_BENCH_GPU_FM_PRECISIONS:-no bf16 fp16}
  fm_args=(--epochs 1)
fi
budget=${ACC_BENCH_GPU_BUDGET_S:-330}
start_s=$SECONDS
parts=$tmp/parts.tsv
: > "$parts"
failed=0

# record NAME STATUS SECONDS DETAIL [JSON]: one line per part, merged into bench-gpu.json at the end.
record() {
  local detail=${4//$'\t'/ }
  detail=${detail//$'\n'/ }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$detail" "${5:-}" >> "$parts"
  [ "$2" = failed ] && failed=1
  echo "run.sh: part $1: $2${4:+ ($detail)}"
}

# limited SECONDS CMD...: runs CMD under `timeout` (when there is one) within what is left of the budget.
# Returns 124 when it ran out of time, 125 when no time was left to start it.
limited() {
  local want=$1
  shift
  local left=$((budget - (SECONDS - start_s)))
  if [ "$left" -lt 15 ]; then return 125; fi
  [ "$want" -gt "$left" ] && want=$left
  if command -v timeout >/dev/null; then
    timeout --kill-after=10 "$want" "$@"
  else
    "$@"
  fi
}

# status_of RC: ok / failed / skipped (no time left) / failed (timed out)
status_of() {
  case $1 in
    0) echo ok ;;
    125) echo skipped ;;
    *) echo failed ;;
  esac
}
why_of() {
  case $1 in
    0) echo "" ;;
    124 | 137) echo "timed out" ;;
    125) echo "no time left in the ${budget} s budget" ;;
    *) echo "exit status $1" ;;
  esac
}

echo "run.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), build $build, python $python, out $out"
echo "run.sh: device $device, precisions: $precisions, batch $batch, context $context, $steps steps after $warmup warmup"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu_name" ] || gpu_name=none
echo "run.sh: GPU: $gpu_name"

# ---- 1. the model ----
model=$tmp/gpt.pt
t0=$SECONDS
limited 240 "$python" "$here/export_gpt.py" "$model" ${export_args[@]+"${export_args[@]}"} 2>&1 |
  tee "$out/bench-gpu-export.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && [ -s "$model" ]; then
  record export ok $((SECONDS - t0)) "$(grep -m 1 -o '^export_gpt: [0-9]* parameters ([0-9.]*M)' "$out/bench-gpu-export.log" |
    cut -d' ' -f2-)"
else
  record export "$(status_of "$rc")" $((SECONDS - t0)) "export_gpt.py: $(why_of "$rc")"
fi

# ---- 2. the decoder: (a) and (b) in bench_gpu, then (c) ----
bench=$build/bench/bench_gpu
if python_accelerate=$("$python" -c 'import accelerate; print(accelerate.__version__)' 2>/dev/null); then
  echo "run.sh: Python Accelerate $python_accelerate"
else
  python_accelerate=""
  echo "run.sh: Python Accelerate is not importable by $python"
fi
for prec in $precisions; do
  if [ ! -s "$model" ]; then
    record "gpt-$prec-ab" failed 0 "no model (the export failed)"
    record "gpt-$prec-c" failed 0 "no model (the export failed)"
    continue
  fi
  tokens=$tmp/tokens-$prec.bin
  json_ab=$out/bench-gpu-$prec-ab.json
  t0=$SECONDS
  if [ -x "$bench" ]; then
    limited 200 "$bench" --model "$model" --precision "$prec" --device "$device" --batch "$batch" \
      --context "$context" --steps "$steps" --warmup "$warmup" --json "$json_ab" --tokens-out "$tokens" 2>&1 |
      tee "$out/bench-gpu-$prec-ab.log"
    rc=${PIPESTATUS[0]}
    record "gpt-$prec-ab" "$(status_of "$rc")" $((SECONDS - t0)) "$(why_of "$rc")" "$json_ab"
  else
    record "gpt-$prec-ab" failed 0 "$bench is missing"
  fi

  json_c=$out/bench-gpu-$prec-c.json
  t0=$SECONDS
  if [ ! -s "$tokens" ]; then
    record "gpt-$prec-c" failed 0 "no token batches (bench_gpu wrote none)"
    continue
  fi
  c_args=(--model "$model" --tokens "$tokens" --precision "$prec" --device "$device" --batch "$batch"
    --context "$context" --steps "$steps" --warmup "$warmup")
  if [ -n "$python_accelerate" ]; then
    limited 200 "$python" "$here/accelerate_gpt.py" "${c_args[@]}" --json "$json_c" 2>&1 | tee "$out/bench-gpu-$prec-c.log"
    rc=${PIPESTATUS[0]}
    record "gpt-$prec-c" "$(status_of "$rc")" $((SECONDS - t0)) "$(why_of "$rc")" "$json_c"
    if [ "${ACC_BENCH_GPU_C_NOFOREACH:-1}" = 1 ]; then
      # PyTorch's AdamW runs multi-tensor (foreach) kernels on the GPU, libtorch's a loop over the
      # parameters: (c) once more with foreach=False tells the optimizer's share of any gap.
      t0=$SECONDS
      json_c2=$out/bench-gpu-$prec-c-noforeach.json
      limited 200 "$python" "$here/accelerate_gpt.py" "${c_args[@]}" --foreach off --json "$json_c2" 2>&1 |
        tee "$out/bench-gpu-$prec-c-noforeach.log"
      rc=${PIPESTATUS[0]}
      record "gpt-$prec-c-noforeach" "$(status_of "$rc")" $((SECONDS - t0)) "$(why_of "$rc")" "$json_c2"
    fi
  elif [ "$tiny" = 1 ]; then
    record "gpt-$prec-c" skipped 0 "Python Accelerate is not importable by $python"
    # The script itself still runs, with plain PyTorch in Accelerate's place.
    limited 200 "$python" "$here/accelerate_gpt.py" "${c_args[@]}" --without-accelerate \
      --json "$out/bench-gpu-$prec-c-check.json" 2>&1 | tee "$out/bench-gpu-$prec-c-check.log"
    rc=${PIPESTATUS[0]}
    record "gpt-$prec-c-script-check" "$(status_of "$rc")" $((SECONDS - t0)) \
      "accelerate_gpt.py --without-accelerate$([ "$rc" -eq 0 ] || echo ": $(why_of "$rc")")" \
      "$out/bench-gpu-$prec-c-check.json"
  else
    record "gpt-$prec-c" failed 0 "Python Accelerate is not importable by $python"
  fi
done

# ---- 3. the Fashion-MNIST job ----
fm=$build/examples/fashion_mnist
fm_data=$(sed -n 's/^ACC_FASHION_MNIST_DIR:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n 1)
for prec in $fm_precisions; do
  name=fashion-mnist-$([ "$prec" = no ] && echo fp32 || echo "$prec")
  if [ ! -x "$fm" ]; then
    if [ "$tiny" = 1 ]; then record "$name" skipped 0 "$fm is not built"; else record "$name" failed 0 "$fm is missing"; fi
    continue
  fi
  if [ -z "$fm_data" ] || [ ! -e "$fm_data/train-images-idx3-ubyte.gz" ]; then
    if [ "$tiny" = 1 ]; then status=skipped; else status=failed; fi
    record "$name" "$status" 0 "no Fashion-MNIST data in '${fm_data}' (ACC_FASHION_MNIST_DIR in $build/CMakeCache.txt)"
    continue
  fi
  work=$tmp/$name
  mkdir -p "$work"
  log=$out/bench-gpu-$name.log
  t0=$(date +%s.%N)
  # Its progress lines go to the log only; the summary lines are shown.
  (cd "$work" && ACCELERATE_MIXED_PRECISION=$prec limited 150 "$fm" "${fm_args[@]}" --save "" --data "$fm_data") \
    > "$log" 2>&1
  rc=$?
  grep -v '^epoch [0-9]*/[0-9]*: ' "$log" | tail -n 20
  elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  rate=$(grep -o '[0-9.]* samples/s' "$log" | tail -n 1 | cut -d' ' -f1)
  source_of_rate="printed by the job (its first epoch)"
  if [ -z "$rate" ]; then  # the sample count it announces over the whole run's time
    samples=$(grep -o ': [0-9]* samples' "$log" | head -n 1 | tr -dc 0-9)
    [ -n "$samples" ] && rate=$(awk -v n="$samples" -v s="$elapsed" 'BEGIN { printf "%.0f", n / s }')
    source_of_rate="train samples / the whole run's wall time"
  fi
  accuracy=$(grep -o 'test accuracy [0-9.]*' "$log" | tail -n 1 | awk '{print $3}')
  device_line=$(grep -o 'training on .*' "$log" | head -n 1)
  printf '{"precision": "%s", "samples_per_s": %s, "samples_per_s_source": "%s", "test_accuracy": %s, "wall_s": %s, "run": "%s"}\n' \
    "$prec" "${rate:-null}" "$source_of_rate" "${accuracy:-null}" "$elapsed" "${device_line//\"/}" > "$out/bench-gpu-$name.json"
  if [ "$rc" -eq 0 ] && [ -z "$rate" ]; then
    record "$name" failed "${elapsed%.*}" "no samples/s in its output" "$out/bench-gpu-$name.json"
  else
    record "$name" "$(status_of "$rc")" "${elapsed%.*}" "$(why_of "$rc")" "$out/bench-gpu-$name.json"
  fi
done

# ---- 4. bench-gpu.json and bench-gpu.md ----
BENCH_PARTS=$parts BENCH_OUT=$out BENCH_GPU_NAME=$gpu_name BENCH_TINY=$tiny BENCH_PYTHON_ACCELERATE=$python_accelerate \
  "$python" - <<'EOF'
import json, math, os

out = os.environ["BENCH_OUT"]
parts = []
with open(os.environ["BENCH_PARTS"]) as f:
    for line in f:
        name, status, seconds, detail, path = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
        part = {"name": name, "status": status, "seconds": int(seconds or 0), "detail": detail}
        if path and os.path.exists(path):
            try:
                with open(path) as j:
                    part["result"] = json.load(j)
            except ValueError as e:
                part["result_error"] = f"{path}: {e}"
        parts.append(part)
by_name = {p["name"]: p for p in parts}


def fig(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "-"


def gib(b):
    return b / 2**30 if isinstance(b, (int, float)) and b >= 0 else None


summary = {"gpu": os.environ["BENCH_GPU_NAME"], "tiny": os.environ["BENCH_TINY"] == "1",
           "python_accelerate": os.environ["BENCH_PYTHON_ACCELERATE"] or None, "gpt": {}, "fashion_mnist": {}}
rows = []
for p in parts:
    if not (p["name"].startswith("gpt-") and p["name"].endswith("-ab")):
        continue
    prec = p["name"][4:-3]
    ab = p.get("result") or {}
    c = (by_name.get(f"gpt-{prec}-c") or {}).get("result") or {}
    c2 = (by_name.get(f"gpt-{prec}-c-noforeach") or {}).get("result") or {}
    entry = {"a": ab.get("a"), "b": ab.get("b"), "c": c if c.get("ok") else None,
             "c_noforeach": c2 if c2.get("ok") else None,
             "ratio_b_over_a": ab.get("ratio_b_over_a"), "ratio_b_over_c": None, "ratio_b_over_c_noforeach": None,
             "batch": ab.get("batch"), "context": ab.get("context"), "parameters": ab.get("parameters"),
             "device_name": ab.get("device_name")}
    b_ms = (ab.get("b") or {}).get("ms_per_step")
    if c.get("ok") and b_ms and c.get("ms_per_step"):
        entry["ratio_b_over_c"] = b_ms / c["ms_per_step"]
    if c2.get("ok") and b_ms and c2.get("ms_per_step"):
        entry["ratio_b_over_c_noforeach"] = b_ms / c2["ms_per_step"]
    summary["gpt"][prec] = entry
    for key, name in (("a", "(a) plain libtorch"), ("b", "(b) C API"), ("c", "(c) Python Accelerate"),
                      ("c_noforeach", "(c) Python Accelerate, AdamW foreach=False")):
        v = entry[key]
        if key == "c_noforeach" and not v and f"gpt-{prec}-c-noforeach" not in by_name:
            continue
        if not v:
            why = by_name.get({"c": f"gpt-{prec}-c", "c_noforeach": f"gpt-{prec}-c-noforeach"}.get(key, p["name"]), {})
            rows.append(f"| {prec} | {name} | - | - | - | - | - | - | {why.get('status', '?')}: "
                        f"{why.get('detail') or (why.get('result') or {}).get('error', '')} |")
            continue
        ratio_a = v["ms_per_step"] / entry["a"]["ms_per_step"] if entry["a"] and v.get("ms_per_step") else None
        note = ""
        if key == "b":
            note = f"b/a {fig(entry['ratio_b_over_a'], '.3f')} (target <= 1.03)"
            if entry["ratio_b_over_c"] is not None:
                note += f", b/c {entry['ratio_b_over_c']:.3f} (target <= 1.0)"
            if entry["ratio_b_over_c_noforeach"] is not None:
                note += f", b/c(foreach=False) {entry['ratio_b_over_c_noforeach']:.3f}"
        if v.get("skipped_steps"):
            note += f"{', ' if note else ''}{v['skipped_steps']} skipped steps"
        rows.append(f"| {prec} | {name} | {fig(v.get('ms_per_step'), '.2f')} | {fig(v.get('tokens_per_s'), ',.0f')} | "
                    f"{fig(gib(v.get('peak_allocated_bytes')), '.2f')} | {fig(gib(v.get('peak_reserved_bytes')), '.2f')} | "
                    f"{fig(ratio_a, '.3f')} | {fig(v.get('first_loss'), '.4f')} -> {fig(v.get('last_loss'), '.4f')} | {note} |")

fm_rows = []
for p in parts:
    if p["name"].startswith("fashion-mnist-"):
        r = p.get("result") or {}
        prec = p["name"][len("fashion-mnist-"):]
        summary["fashion_mnist"][prec] = dict(r, status=p["status"])
        fm_rows.append(f"| {prec} | {fig(r.get('samples_per_s'), ',.0f')} | {fig(r.get('test_accuracy'), '.2f')} | "
                       f"{fig(r.get('wall_s'), '.1f')} | {p['status']}{': ' + p['detail'] if p['detail'] else ''} |")

summary["parts"] = parts
summary["failed"] = [p["name"] for p in parts if p["status"] == "failed"]
with open(os.path.join(out, "bench-gpu.json"), "w") as f:
    json.dump(summary, f, indent=1)
    f.write("\n")

any_ab = next((e for e in summary["gpt"].values() if e.get("batch")), {})
md = [f"# GPU benchmark: {summary['gpu']}" + (" (tiny model on the CPU: a check of the script, not figures)"
                                               if summary["tiny"] else ""),
      "",
      f"Decoder: {fig((any_ab.get('parameters') or 0) / 1e6, '.1f')}M parameters, batch {any_ab.get('batch', '-')} x "
      f"context {any_ab.get('context', '-')}, AdamW (lr 3e-4, weight decay 0.01), autocast; ms/step is the median of "
      f"the CUDA-synchronised steps after warmup; (a) pools its runs before and after (b). Python Accelerate: "
      f"{summary['python_accelerate'] or 'not importable'}.",
      "",
      "| precision | variant | ms/step | tokens/s | peak GiB (allocated) | peak GiB (reserved) | vs (a) | loss first -> last | notes |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"] + rows + [
      "",
      "Fashion-MNIST job (examples/c/fashion_mnist, one epoch, batch 64):",
      "",
      "| precision | samples/s | test accuracy % | wall s | status |",
      "| --- | ---: | ---: | ---: | --- |"] + fm_rows + [
      "",
      "Parts: " + ", ".join(f"{p['name']} {p['status']} ({p['seconds']} s)" for p in parts),
      ""]
with open(os.path.join(out, "bench-gpu.md"), "w") as f:
    f.write("\n".join(md))
print("\n".join(md))
EOF
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "run.sh: writing bench-gpu.json / bench-gpu.md failed (exit status $rc)" >&2
  failed=1
fi
echo "run.sh: done in $((SECONDS - start_s)) s, $([ "$failed" = 0 ] && echo 'every part ok' || echo 'some part failed'); results in $out"
exit "$failed"
