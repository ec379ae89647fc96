#!/usr/bin/env bash
# Configures and builds accelerate in build/ (clang++ with precompiled headers: 5x faster than g++
# on libtorch's headers). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ACC_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "$@"
fi
cmake --build "$build"
