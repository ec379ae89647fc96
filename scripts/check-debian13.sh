#!/usr/bin/env bash
# Builds this checkout against Debian 13's libtorch 2.6 and runs every CPU test, in a Debian 13
# chroot: there the fixtures are written by torch 2.6's own Python, so every test that holds the
# library to PyTorch (optimizers, attention, data order, TorchScript) holds it to PyTorch 2.x.
# Needs root, debootstrap and Debian's mirror; about 2.5 GB, and 15 to 25 minutes on 2 cores.
#   scripts/check-debian13.sh [ROOT]    (the chroot; default /var/tmp/accelerate-debian13, kept for reruns)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/var/tmp/accelerate-debian13}
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
chroot "$root" env ACC_BUILD_DIR=/build bash -c \
  'cd /src && scripts/setup.sh && scripts/build.sh && ctest --test-dir /build -LE gpu -j2 --output-on-failure'
