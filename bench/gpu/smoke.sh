#!/usr/bin/env bash
# CTest's bench_gpu_smoke: run.sh's tiny configuration on the CPU (ACC_BENCH_GPU_TINY=1), then a check
# of what it wrote: (a) and (b) timed for fp32 and bf16 and starting from the same loss, and (c) (or,
# without Python Accelerate, the script's plain-PyTorch check) too.
#   smoke.sh BUILD_DIR PYTHON WORK_DIR
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: smoke.sh BUILD_DIR PYTHON WORK_DIR" >&2; exit 2; }
build=$1
python=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
ACC_BENCH_GPU_TINY=1 bash "$(dirname "$0")/run.sh" "$build" "$python" "$work" || exit 1
"$python" - "$work/bench-gpu.json" <<'PY'
import json, sys

summary = json.load(open(sys.argv[1]))
parts = {p["name"]: p for p in summary["parts"]}
problems = []
for prec in ("fp32", "bf16"):
    entry = summary["gpt"].get(prec) or {}
    a, b = entry.get("a") or {}, entry.get("b") or {}
    if not (a.get("ms_per_step", 0) > 0 and b.get("ms_per_step", 0) > 0):
        problems.append(f"{prec}: no (a)/(b) step times")
        continue
    # Same weights, same first batch: the same loss.
    if abs(a["first_loss"] - b["first_loss"]) > 1e-3:
        problems.append(f"{prec}: first losses differ: (a) {a['first_loss']} (b) {b['first_loss']}")
    c = (parts.get(f"gpt-{prec}-c") or {}).get("result") or (parts.get(f"gpt-{prec}-c-script-check") or {}).get("result")
    if not (c and c.get("ok")):
        problems.append(f"{prec}: accelerate_gpt.py did not run: {(c or {}).get('error', 'no result')}")
    elif abs(c["first_loss"] - a["first_loss"]) > 1e-3:
        problems.append(f"{prec}: first losses differ: (a) {a['first_loss']} (c) {c['first_loss']}")
if problems:
    print("bench_gpu_smoke: " + "; ".join(problems))
    sys.exit(1)
print("bench_gpu_smoke: ok")
PY
