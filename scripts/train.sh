#!/usr/bin/env bash
# The main job: sets up, builds, and trains a CNN on Fashion-MNIST through the C API, data-parallel
# on 2 processes started by accelerate-launch (ACC_NUM_PROCESSES to change that).
# Arguments go to the program (e.g. --epochs 2); see examples/c/fashion_mnist.c. It runs in the
# folder it is started from, so relative paths (--data, --save, --project-dir) are the caller's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for arg in "$@"; do
  if [ "$arg" = --help ] || [ "$arg" = -h ]; then
    echo "usage: scripts/train.sh [fashion_mnist's arguments]   (ACC_NUM_PROCESSES: processes, default 2)"
    # The program's own usage, once it is built; the set-up and build are not run for --help.
    if [ -x "$root/${ACC_BUILD_DIR:-build}/examples/fashion_mnist" ]; then
      "$root/${ACC_BUILD_DIR:-build}/examples/fashion_mnist" --help
    else
      sed -n '/^ \*   fashion_mnist/,/^ \*$/p' "$root/examples/c/fashion_mnist.c" | sed 's/^ \* *//'
    fi
    exit 0
  fi
done
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${ACC_BUILD_DIR:-build}
[[ $build = /* ]] || build=$root/$build
exec "$build/accelerate-launch" --num_processes "${ACC_NUM_PROCESSES:-2}" "$build/examples/fashion_mnist" "$@"
