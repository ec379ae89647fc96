#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds everything and runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${ACC_BUILD_DIR:-build}" --output-on-failure -j2 "$@"
