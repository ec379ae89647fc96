#!/usr/bin/env bash
# Builds this checkout against Debian 13's libtorch 2.6 and runs every CPU test, in a Debian 13
# chroot: there the fixtures are written by torch 2.6's own Python, so every test that holds the
# library to PyTorch (optimizers, attention, data order, TorchScript) holds it to PyTorch 2.x.
# With --cuda, against Debian 13's CUDA build of libtorch 2.6 (contrib, CUDA 12.4 and NCCL from
# non-free) instead: the CUDA and NCCL code is compiled and linked (ACC_WITH_CUDA), every CPU test
# runs on that libtorch, and the GPU tests report themselves skipped (no GPU here).
# With --accelerate, then trains through the C API next to Python Accelerate, step by step
# (tests/sidebyside/run.sh, on torch 2.6), with Accelerate's sources (Debian has no package):
# ACCELERATE_SRC (a checkout or a bare repository of huggingface/accelerate), else a clone;
# ACC_SIDE_BY_SIDE_SCENARIOS names the scenarios to run (default all), ACC_SIDE_BY_SIDE_PROCESSES
# the process counts (default "1 2").
# Needs root, debootstrap and Debian's mirror; about 2.5 GB (--cuda: 15 GB), and 10 to 25 minutes on 2 cores.
#   scripts/check-debian13.sh [--cuda | --accelerate] [ROOT]
#   (ROOT: the chroot; default /var/tmp/accelerate-debian13[-cuda], kept for reruns)
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=false accelerate=false
if [ "${1:-}" = --cuda ]; then cuda=true; shift; fi
if [ "${1:-}" = --accelerate ]; then accelerate=true; shift; fi
root=${1:-/var/tmp/accelerate-debian13$($cuda && echo -cuda || true)}
[ "$(id -u)" -eq 0 ] || { echo "check-debian13: run as root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
[ -x "$root/usr/bin/apt-get" ] ||
  debootstrap --variant=minbase trixie "$root" "${ACC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

mounted=()
unmount_all() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done; }
trap unmount_all EXIT
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
for d in dev dev/shm; do mount --bind "/$d" "$root/$d" && mounted+=("$root/$d"); done
cp /etc/resolv.conf "$root/etc/resolv.conf"

# The checkout as it is (tracked and untracked files, not ignored ones) into /src, built afresh in
# /build (an earlier build beside files copied with their own times could mix generated sources).
rm -rf "$root/src" "$root/build" && mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard |
  xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
  tar --null -T - -cf - | tar -xf - -C "$root/src"
exclude=$($cuda && echo "libtorch-dev libgloo-dev python3-torch" || true)
chroot "$root" env ACC_SETUP_EXCLUDE="$exclude" bash -c 'cd /src && scripts/setup.sh'
if ! $cuda; then
  chroot "$root" env ACC_BUILD_DIR=/build bash -c 'cd /src && scripts/build.sh && ctest --test-dir /build -LE gpu -j2 --output-on-failure'
  $accelerate || exit 0
  rm -rf "$root/opt/accelerate" && mkdir -p "$root/opt/accelerate"
  src=${ACCELERATE_SRC:-}
  if [ -z "$src" ]; then
    git clone -q --depth 1 https://github.com/huggingface/accelerate "$root/opt/accelerate"
  elif [ -d "$src/src/accelerate" ]; then
    cp -r "$src/src" "$root/opt/accelerate/"
  else
    git --git-dir="$src" archive HEAD src/accelerate | tar -x -C "$root/opt/accelerate"
  fi
  chroot "$root" env ACC_SIDE_BY_SIDE_SCENARIOS="${ACC_SIDE_BY_SIDE_SCENARIOS:-}" \
    ACC_SIDE_BY_SIDE_PROCESSES="${ACC_SIDE_BY_SIDE_PROCESSES:-1 2}" bash -c \
    'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-safetensors >/dev/null &&
    cd /src && PYTHONPATH=/opt/accelerate/src tests/sidebyside/run.sh /build /tmp/sidebyside $ACC_SIDE_BY_SIDE_SCENARIOS'
  exit
fi

# The CUDA libtorch replaces the CPU one (and its Python torch, which writes the fixtures, and Gloo).
# It depends on nvidia-cudnn, a package that downloads cuDNN from NVIDIA when installed: a placeholder
# package stands in for it, and a stub libcudnn.so.9 holding the functions libtorch calls (each
# returns an error) lets the libraries load. Nothing calls them without a GPU.
chroot "$root" bash -s <<'EOF'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
echo "deb ${ACC_DEBIAN_MIRROR:-http://deb.debian.org/debian} trixie main contrib non-free" > /etc/apt/sources.list
apt-get update -q
apt-get install -y -q --no-install-recommends equivs gcc-13 g++-13
if ! dpkg -s nvidia-cudnn >/dev/null 2>&1; then
  cd /tmp
  printf '%s\n' 'Package: nvidia-cudnn' 'Version: 9.0.0.312~cuda12' 'Section: misc' 'Priority: optional' \
    'Description: placeholder for the cuDNN downloader (a stub library: no GPU here)' > nvidia-cudnn.ctl
  equivs-build nvidia-cudnn.ctl >/dev/null && dpkg -i nvidia-cudnn_*.deb
fi
apt-get install -y -q --no-install-recommends libtorch-cuda-dev python3-torch-cuda libgloo-cuda-dev libnccl-dev \
  nvidia-cuda-toolkit nvidia-cuda-dev
libdir=/usr/lib/x86_64-linux-gnu
if [ ! -e $libdir/libcudnn.so.9 ]; then
  nm -D --undefined-only $libdir/libtorch_cuda.so $libdir/libtorch_python.so |
    sed -n 's/^ *U \(cudnn[A-Za-z0-9_]*\)@libcudnn.so.9$/\1/p' | sort -u |
    sed 's/.*/int &(void) { return 1; }/' > /tmp/cudnn_stub.c
  echo 'libcudnn.so.9 { global: *; };' > /tmp/cudnn_stub.map
  gcc-13 -shared -fPIC -o $libdir/libcudnn.so.9 -Wl,-soname,libcudnn.so.9 -Wl,--version-script=/tmp/cudnn_stub.map /tmp/cudnn_stub.c
  ldconfig
fi
EOF
# Debian's nvcc 12.4 takes gcc up to 13 as its host compiler, and no clang past 17.
chroot "$root" env ACC_BUILD_DIR=/build bash -c \
  'cd /src && scripts/build.sh -DCMAKE_CUDA_HOST_COMPILER=g++-13 && ctest --test-dir /build -j2 --output-on-failure'
