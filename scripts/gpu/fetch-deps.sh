#!/usr/bin/env bash
# Downloads, on a Debian 12 machine with apt, the Debian packages that a GPU machine without
# internet or apt lacks (see scripts/gpu/build.sh), into deps/gpu/debs (git ignores deps/).
# Nothing is installed here: build.sh unpacks them into a private prefix on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${ACC_DEPS_DIR:-deps/gpu}/debs
packages=(
  libyaml-cpp-dev libyaml-cpp0.7                        # Accelerate's config file
  nlohmann-json3-dev libcli11-dev zlib1g-dev            # header-only JSON and CLI; zlib headers
  protobuf-compiler libprotoc32 libprotobuf32 libprotobuf-lite32 libprotobuf-dev  # TensorBoard events
  libgtest-dev libgmock-dev                             # GoogleTest (its CMake package names gmock too)
  libgloo-dev                                           # headers that c10d's ProcessGroupGloo.hpp includes
  libsqlite3-dev libsqlite3-0                           # trackio's project databases
  dataset-fashion-mnist                                 # the main job's data
)
mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb
# apt-get download fetches exactly the named packages (no dependencies): the list above is closed.
apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
count=$(ls ./*.deb | wc -l)
[ "$count" -eq "${#packages[@]}" ] || { echo "fetch-deps: got $count of ${#packages[@]} packages" >&2; exit 1; }
echo "fetch-deps: ${#packages[@]} packages ($(du -sh . | cut -f1)) in $dest"
