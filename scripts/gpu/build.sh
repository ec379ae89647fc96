#!/usr/bin/env bash
# Builds accelerate on a machine with PyTorch 2.x in python3, CMake, Ninja and a C++ compiler (an
# NVIDIA GPU and nvcc for the CUDA build) but no internet and no Debian packages, such as the GPU
# machine: the Debian packages that scripts/gpu/fetch-deps.sh downloaded into deps/gpu/debs are
# unpacked into a private prefix (deps/gpu/prefix, never /), then CMake configures against the
# libtorch inside that PyTorch (torch.utils.cmake_prefix_path) and builds with every core.
#   scripts/gpu/build.sh [extra cmake arguments]
# ACC_PYTHON: the python3 holding torch; ACC_TORCH_CMAKE_PREFIX: a libtorch's CMake folder instead
# (e.g. /usr/lib/x86_64-linux-gnu/cmake for Debian's); ACC_BUILD_DIR (build-gpu), ACC_DEPS_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh

[ -n "$(ls "$deps"/debs/*.deb 2>/dev/null)" ] || {
  echo "build: no packages in $deps/debs: run scripts/gpu/fetch-deps.sh on a Debian 12 machine first" >&2; exit 1; }
mkdir -p "$prefix/.unpacked"
for deb in "$deps"/debs/*.deb; do
  stamp=$prefix/.unpacked/$(basename "$deb")
  [ -f "$stamp" ] && continue
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix"
  else  # a .deb is an ar archive holding data.tar.xz
    ar p "$deb" data.tar.xz | tar -xJ -C "$prefix"
  fi
  touch "$stamp"
done
# Debian's -dev packages link some libraries absolutely (libz.so -> /lib/.../libz.so.1.2.13): point
# each such link into the prefix, else at this machine's copy with the same soname.
while IFS= read -r link; do
  target=$(readlink "$link")
  if [ -e "$prefix$target" ]; then ln -sfn "$prefix$target" "$link"; continue; fi
  candidate=$target
  while [ ! -e "$candidate" ] && [[ "$candidate" == *.so.* ]]; do candidate=${candidate%.*}; done
  [ -e "$candidate" ] && ln -sfn "$candidate" "$link"
done < <(find "$prefix" -type l -lname '/*')

torch_cmake=${ACC_TORCH_CMAKE_PREFIX:-$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')}
# The NCCL header of a PyTorch wheel's CUDA build lives in the nvidia-nccl package.
nccl_root=$("$python" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
if command -v clang++ >/dev/null; then compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++); else
  compilers=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++); fi
# nvcc may not know this clang: give it g++ as host compiler (see CMakeLists.txt), and let it take a
# newer g++ than it lists: no CUDA source is compiled, only CMake's probe of nvcc.
host_gxx=$(command -v g++ || command -v "$(compgen -c g++- | grep -E '^g\+\+-[0-9]+$' | sort -t- -k2 -n | tail -1)" || true)
if [[ "${compilers[*]}" == *clang* ]] && command -v nvcc >/dev/null && [ -n "$host_gxx" ]; then
  compilers+=(-DCMAKE_CUDA_HOST_COMPILER="$host_gxx"); fi
command -v nvcc >/dev/null && compilers+=(-DCMAKE_CUDA_FLAGS=-allow-unsupported-compiler)
echo "build: libtorch from $torch_cmake, packages from $prefix, ${compilers[*]}"
# The prefix first: its headers are the ones on the include path, so its CMake packages (GoogleTest,
# yaml-cpp) must win over any other copy, e.g. beside a system libtorch's CMake files.
cmake -S . -B "$build" -G Ninja "${compilers[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_cmake" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc" \
  -DProtobuf_INCLUDE_DIR="$prefix/usr/include" -DProtobuf_LIBRARY="$libdir/libprotobuf.so" \
  -DSQLite3_INCLUDE_DIR="$prefix/usr/include" -DSQLite3_LIBRARY="$libdir/libsqlite3.so" \
  -DACC_PYTHON_TORCH="$python" \
  -DACC_FASHION_MNIST_DIR="$prefix/usr/share/datasets/fashion-mnist" \
  -DACC_BUILD_BINDINGS=OFF \
  ${nccl_root:+-DACC_NCCL_ROOT="$nccl_root"} "$@"
# A machine's own protobuf headers (another version than the library linked) must not be the ones
# compiled against: say which were chosen, and how the generated code is compiled.
grep -E '^(Protobuf_INCLUDE_DIR|Protobuf_LIBRARY|ACC_NCCL_INCLUDE_DIR|ACC_GLOO_INCLUDE_DIR):' "$build/CMakeCache.txt" || true
ninja -C "$build" -t commands 2>/dev/null | grep -m1 'hparams.pb.cc' || true
grep -hm1 'define GOOGLE_PROTOBUF_VERSION\|define PROTOBUF_VERSION ' /usr/include/google/protobuf/*.h \
  /usr/include/google/protobuf/*.inc 2>/dev/null | sed 's|^|this machine has protobuf headers in /usr/include: |' || true
# -k 0: every file that compiles is built, and every error is in the log at once (a GPU visit is short).
cmake --build "$build" -j "$(nproc)" -- -k 0
