#!/usr/bin/env bash
# gpu.optimizers_equal_pytorchs_on_cuda, gpu.averaged_models_equal_pytorchs_on_cuda: a PyTorch
# exporter writes its fixture computed on CUDA into OUT_DIR, then the C API test that holds ours to
# it runs there. Exits 77 (skipped) when PYTHON's torch has no CUDA.
#   fixture_on_cuda.sh PYTHON EXPORT_SCRIPT OUT_DIR ACC_CAPI_TESTS GTEST_FILTER
set -euo pipefail
python=$1 export_script=$2 out=$3 tests=$4 filter=$5
"$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 77)' || {
  rc=$?; [ $rc -eq 77 ] && echo "SKIPPED: $python's torch has no CUDA"; exit $rc; }
"$python" "$export_script" "$out" cuda
ACC_TEST_DATA=$out exec "$tests" --gtest_filter="$filter"
