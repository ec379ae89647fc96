#!/usr/bin/env bash
# Every scenario of side_by_side.py on 1 and 2 processes (ACC_SIDE_BY_SIDE_DEVICE=cuda: on the GPU,
# 1 process): Python Accelerate (under torchrun, through ../dist/torchrun.py, which lets a PyTorch
# built without libuv start it) next to the C API (accelerate-launch), compared value by value.
# Needs a python with torch and accelerate (ACC_PYTHON, default python3; PYTHONPATH may name
# Accelerate's sources) and a build of this project.
#   tests/sidebyside/run.sh BUILD_DIR OUT_DIR [SCENARIO...]
# Exit 1 when a scenario differs; a table of results on stdout.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
out=$2
shift 2
mkdir -p "$out"
script="$here/side_by_side.py"
python=${ACC_PYTHON:-python3}
"$python" "$script" export "$out" || exit 2
scenarios=$("$python" "$script" list "$@") || exit 2
counts=${ACC_SIDE_BY_SIDE_PROCESSES:-1 2}  # the process counts to run, e.g. "1 2 3"
[ "${ACC_SIDE_BY_SIDE_DEVICE:-cpu}" = cpu ] || counts=1  # one GPU: NCCL takes one process per device
status=0
port=${ACC_SIDE_BY_SIDE_PORT:-29611}
for n in $counts; do
  for s in $scenarios; do
    if ! "$python" "$script" applies "$s" "$n"; then
      echo "$s on $n process(es): not applicable (the scenario lists the process counts it runs on)"
      continue
    fi
    if [ "$n" = 1 ]; then
      ACC_BUILD_DIR="$build" "$python" "$script" run accelerate "$s" "$out" &&
        ACC_BUILD_DIR="$build" "$python" "$script" run ours "$s" "$out"
    else
      ACC_BUILD_DIR="$build" "$python" "$here/../dist/torchrun.py" --nproc_per_node "$n" --master_port "$port" \
        "$script" run accelerate "$s" "$out" &&
        ACC_BUILD_DIR="$build" "$build/accelerate-launch" --num_processes "$n" --main_process_port $((port + 1)) \
          "$python" "$script" run ours "$s" "$out"
    fi > "$out/$s.$n.log" 2>&1 || { echo "$s on $n process(es) failed to run: see $out/$s.$n.log"; status=1; continue; }
    "$python" "$script" compare "$s" "$out" "$n" || status=1
  done
done
exit $status
