#!/usr/bin/env bash
# The README's first C program ("The C API by example") compiles as it is written, warnings as
# errors, against the library's header, and trains one epoch where the data is installed.
#   readme_c_example.sh README INCLUDE_DIR LIBRARY_DIR WORK_DIR
set -euo pipefail
readme=$1 include=$2 libdir=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
awk '/^## The C API by example/ { section = 1 } section && /^```c$/ { code = 1; next }
     code && /^```$/ { exit } code { print }' "$readme" > "$work/main.c"
[ -s "$work/main.c" ] || { echo "no C block under 'The C API by example'"; exit 1; }
cc -std=c11 -Wall -Wextra -Werror -I"$include" "$work/main.c" -L"$libdir" -laccelerate -Wl,-rpath,"$libdir" \
  -o "$work/main"
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  "$work/main"
  echo "readme_c_example: compiled and trained"
else
  echo "readme_c_example: compiled (no Fashion-MNIST data here to run it)"
fi
