#!/usr/bin/env bash
# The C and C++ examples answer --help (exit 0) and refuse a bad command line at once, before any
# training, with exit code 2 and what is wrong; nothing is left behind.
#   usage_check.sh EXAMPLES_BUILD_DIR WORK_DIR
set -uo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work/project/checkpoints/checkpoint_0" && cd "$work" || exit 1
fail() { echo "usage_check: $*"; exit 1; }
expect() {  # CODE REGEX PROGRAM [ARGS...]
  local code=$1 regex=$2 program=$3 got=0 out
  shift 3
  out=$(timeout 60 "$bin/$program" "$@" 2>&1) || got=$?
  [ "$got" = "$code" ] && grep -Eq -- "$regex" <<<"$out" || fail "$program $* exited $got: $out"
}
expect 0 '^usage: quickstart' quickstart --help
expect 2 'usage: quickstart' quickstart a b
expect 0 '^usage: fashion_mnist' fashion_mnist --help
expect 2 'unknown argument extra' fashion_mnist extra
expect 2 'must be from 1 to 2147483647' fashion_mnist --epochs 4294967297
expect 2 'must be from 0 to' fashion_mnist --train-samples -5
expect 2 'missing is not an existing folder' fashion_mnist --save "$work/missing/m.pt"
expect 2 'is a folder' fashion_mnist --save "$work"
expect 2 'holds the checkpoints of an earlier run' fashion_mnist --project-dir project --checkpoint-every 3
expect 0 '^usage: char_lm' char_lm --help
expect 2 '--context must be from 2' char_lm --context 1
expect 2 '--epochs needs a value' char_lm --epochs
expect 0 '^usage: fashion_mnist_cpp' fashion_mnist_cpp --help
expect 2 'is not a whole number' fashion_mnist_cpp 99999999999999999999
left=$(ls -A "$work" | grep -vx project)
[ -z "$left" ] || fail "left behind: $left"
echo "usage_check: all passed"
