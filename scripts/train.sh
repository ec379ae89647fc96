#!/usr/bin/env bash
# The main job: sets up, builds, and trains a CNN on Fashion-MNIST through the C API.
# Arguments go to the program (e.g. --epochs 2); see examples/c/fashion_mnist.c.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec "${ACC_BUILD_DIR:-build}/examples/fashion_mnist" "$@"
