#!/usr/bin/env bash
# The GPU machine's whole visit in one command that ends in time: build (scripts/gpu/build.sh), then
# scripts/gpu/test.sh's parts, most wanted first, each under what is left of the budget; then packs
# what came out into at most 8 files in OUT_DIR (the device tool brings back 8 files, 2 folders deep):
# summary.txt, parts.tsv, the GPU tests' log, the benchmark's table and figures, and everything else
# in results.tar.gz.
#   scripts/gpu/session.sh [OUT_DIR]          (OUT_DIR: else $OUT, else gpu-results/)
# ACC_GPU_SESSION_S: the budget in seconds from now (default 560: a device call may run 600);
# ACC_GPU_PARTS as test.sh's (default "gpu bench cpu sidebyside-cuda"). Run it again on the same
# machine for the parts that did not fit: the build is then only checked.
# Before, on a Debian 12 machine: scripts/gpu/fetch-deps.sh (the packages travel in deps/gpu/debs).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-gpu-results}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
deadline=$(($(date +%s) + ${ACC_GPU_SESSION_S:-560}))
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session.XXXXXX")
start=$SECONDS

# The build keeps 150 s for the parts after it (a build cut short is the result then).
build_rc=0
build_limit=$((deadline - 150 - $(date +%s)))
[ "$build_limit" -ge 60 ] || build_limit=60  # timeout 0 would mean no limit at all
timeout --kill-after=10 "$build_limit" bash scripts/gpu/build.sh > "$work/build.log" 2>&1 || build_rc=$?
build_s=$((SECONDS - start))
echo "session: build exit $build_rc after $build_s s"

# A build with errors still runs the GPU tests that were built (the rest is Not Run), for at most 180 s:
# the device time left is then for a second visit with the errors fixed.
test_rc=1
parts=${ACC_GPU_PARTS:-gpu bench cpu sidebyside-cuda}
if [ "$build_rc" -ne 0 ]; then
  parts=gpu
  [ "$deadline" -gt $(($(date +%s) + 180)) ] && deadline=$(($(date +%s) + 180))
fi
if [ -f "${ACC_BUILD_DIR:-build-gpu}/build.ninja" ]; then
  ACC_GPU_DEADLINE=$deadline ACC_GPU_PARTS=$parts \
    bash scripts/gpu/test.sh "$work/results" > "$work/test.log" 2>&1
  test_rc=$?
fi

{
  echo "session: $(date -u '+%F %T UTC'), build exit $build_rc in $build_s s, tests exit $test_rc, $((SECONDS - start)) s in all"
  cat "$work/results/machine.txt" 2>/dev/null
  [ "$build_rc" -eq 0 ] || { echo "--- the build's errors"; grep -E 'error:|FAILED:' "$work/build.log" | head -n 80
    echo "--- the build's last lines"; tail -n 30 "$work/build.log"; }
  echo "--- parts"
  cat "$work/results/parts.tsv" 2>/dev/null
  for log in ctest-gpu ctest-cpu; do
    [ -f "$work/results/$log.log" ] || continue
    echo "--- $log: failures and totals"
    grep -E '\*\*\*Failed|\(Failed\)|\(Timeout\)|\(Skipped\)|Not Run|tests passed|Total Test time' "$work/results/$log.log" | tail -n 40
  done
  [ -f "$work/results/ctest-gpu.log" ] && { echo "--- figures the GPU tests printed";
    grep -E 'GiB|MiB|samples/s|accuracy' "$work/results/ctest-gpu.log" | grep -v 'Test #' | head -n 40; }
  for log in sidebyside-cuda sidebyside-cpu; do
    [ -f "$work/results/$log.log" ] && { echo "--- $log"; grep -E 'process\(es\)|first difference|failed to run' "$work/results/$log.log"; }
  done
  [ -f "$work/results/bench/bench-gpu.md" ] && { echo "--- bench/gpu"; cat "$work/results/bench/bench-gpu.md"; }
} > "$out/summary.txt" 2>&1
cp "$work/results/parts.tsv" "$out/" 2>/dev/null
[ "$build_rc" -eq 0 ] || cp "$work/build.log" "$out/"
cp "$work/results/ctest-gpu.log" "$out/" 2>/dev/null
cp "$work/results/bench/bench-gpu.md" "$work/results/bench/bench-gpu.json" "$out/" 2>/dev/null
cp "$work/build.log" "$work/test.log" "$work/results/" 2>/dev/null || cp "$work/build.log" "$out/"
tar -czf "$out/results.tar.gz" -C "$work" results 2>/dev/null
cat "$out/summary.txt"
rm -rf "$work"
[ "$build_rc" -eq 0 ] && [ "$test_rc" -eq 0 ]
