#!/usr/bin/env bash
# Builds the native binding into npm/linux-x64-gnu/ (the @vidsheet/binding-linux-x64-gnu package).
#
#   scripts/build-native.sh           the shipped build: self-contained, FFmpeg (LGPL) and dav1d
#                                     linked statically from scripts/build-ffmpeg.sh's cached prefix
#                                     (built once per source version and configure line, ~6.5
#                                     CPU-minutes; then reused). `readelf -d` lists the C runtime only.
#   scripts/build-native.sh --system  the fast developer loop: links the system FFmpeg dynamically
#                                     (needs libavcodec-dev libavformat-dev libavutil-dev
#                                     libswscale-dev pkg-config libclang-dev). The result loads only
#                                     where those exact libraries are installed: never publish it.
#
# The two builds use separate cargo target directories, so switching does not rebuild the other.
# Next to the .node go vidsheet's LICENSE and, from the shipped build, what the package must carry
# with a static FFmpeg: THIRD-PARTY-LICENSES/ (FFmpeg's LGPL, dav1d's and zlib's licences, Debian's copyright files) and
# FFMPEG-BUILD-INFO.txt (source package versions and the exact configure lines).
set -euo pipefail
cd "$(dirname "$0")/.."

out=npm/linux-x64-gnu
napi_build=(npx napi build --platform --release --manifest-path crates/vidsheet-node/Cargo.toml
  --output-dir "$out" --no-js --dts index.d.ts)

cp LICENSE "$out/LICENSE"
case "${1:-}" in
  --system)
    rm -rf "$out/THIRD-PARTY-LICENSES" "$out/FFMPEG-BUILD-INFO.txt"
    exec "${napi_build[@]}"
    ;;
  "") ;;
  *)
    echo "usage: $0 [--system]" >&2
    exit 2
    ;;
esac

prefix="$(scripts/build-ffmpeg.sh | tail -n1)"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" PKG_CONFIG_ALL_STATIC=1 \
  "${napi_build[@]}" --target-dir target/static --features static-ffmpeg --strip

rm -rf "$out/THIRD-PARTY-LICENSES"
cp -r "$prefix/licenses" "$out/THIRD-PARTY-LICENSES"
cp "$prefix/build-info.txt" "$out/FFMPEG-BUILD-INFO.txt"
