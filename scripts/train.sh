#!/usr/bin/env bash
# The main job: sets up, builds, and trains a CNN on Fashion-MNIST through the C API, data-parallel
# on 2 processes started by accelerate-launch (ACC_NUM_PROCESSES to change that).
# Arguments go to the program (e.g. --epochs 2); see examples/c/fashion_mnist.c.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${ACC_BUILD_DIR:-build}
exec "$build/accelerate-launch" --num_processes "${ACC_NUM_PROCESSES:-2}" "$build/examples/fashion_mnist" "$@"
