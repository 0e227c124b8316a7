#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for vidsheet: system packages (FFmpeg, which the fallback
# engine and the tests' oracle run, and its development libraries for `cargo test`/clippy and the
# `build:native:system` developer build; libclang for the native binding's bindgen, a C++ compiler
# for better-sqlite3, Chromium, PostgreSQL and nginx for the tests), moto's S3 server for the
# storage tests, npm dependencies from the lock file, then the native addon (`npm run build:native`:
# the self-contained build, whose static FFmpeg scripts/build-ffmpeg.sh builds once from Debian's
# source packages and caches by key, linked by zig for glibc 2.28: scripts/build-native.sh installs
# the pinned ziglang and cargo-zigbuild from PyPI into that cache when missing) and the TypeScript
# build. Safe to run again: it installs and builds only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(ffmpeg libavcodec-dev libavformat-dev libavutil-dev libavfilter-dev libavdevice-dev
  libswscale-dev libswresample-dev libclang-dev pkg-config g++ make
  # pip: moto below, and zig for the binding's glibc 2.28 link (scripts/build-native.sh).
  python3-pip
  # The keys page's tests drive Debian's Chromium (playwright-core downloads no browser); the
  # scale-out tests start a throwaway PostgreSQL and put deploy/nginx.conf in front of two servers.
  chromium postgresql nginx-light)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The S3 storage tests talk to moto's S3-compatible server (Python, from PyPI).
if ! python3 -c 'import moto.server' 2>/dev/null; then
  python3 -m pip install --quiet "moto[server]"
fi

# Not `npm ci`: the lock file cannot list other platforms' optional binaries (Biome, napi-rs) where
# the registry mirror serves only this platform's, and `npm ci` rejects such a lock as out of sync.
# better-sqlite3 (the server's ledger) is compiled from its bundled SQLite against this Node's own
# headers, so nothing is downloaded from outside the npm registry.
nodedir="$(dirname "$(dirname "$(command -v node)")")"
if [ ! -f "$nodedir/include/node/node.h" ]; then
  echo "setup: Node's headers are missing ($nodedir/include/node/node.h); install Node with its headers" >&2
  exit 1
fi
npm_config_build_from_source=true npm_config_nodedir="$nodedir" npm install --no-save --no-audit --no-fund
if command -v cargo >/dev/null; then
  npm run build
else
  echo "setup: cargo not found, so the native addon is not built; vidsheet will use its ffmpeg" >&2
  echo "setup: fallback engine. Install Rust (https://rustup.rs) and run this again for the addon." >&2
  npm run build:ts
fi
