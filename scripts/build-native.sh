#!/usr/bin/env bash
# Builds the native binding into npm/linux-x64-gnu/ (the @vidsheet/binding-linux-x64-gnu package).
#
#   scripts/build-native.sh           the shipped build: self-contained, FFmpeg (LGPL) and dav1d
#                                     linked statically from scripts/build-ffmpeg.sh's cached prefix
#                                     (built once per source version and configure line, ~6.5
#                                     CPU-minutes; then reused). `readelf -d` lists the C runtime only.
#                                     Linked by zig (cargo-zigbuild, napi's `-x`) against glibc 2.28's
#                                     symbol versions, so it loads on glibc 2.28 and newer (issue 38).
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

# The build machine's glibc (2.36 on bookworm) would bind every libc/libm call to its newest symbol
# version (stat64@2.33, pthread_*@2.34, hypot@2.35...), and the binding would not load on an older
# glibc. zig links against stubs of glibc 2.28's symbol lists instead, so the same objects (Rust's
# and the gcc-built FFmpeg) bind to the versions 2.28 has; a call 2.28 lacks would be left unversioned,
# which test/package/glibc.test.ts rejects. Both tools come from PyPI (zig as the `ziglang` wheel,
# which cargo-zigbuild runs through `python3 -m ziglang`), pinned so a build is repeatable, and are
# installed with `pip --target` into the build cache: no system or user site-packages is touched
# (so a Debian Python's "externally managed" refusal does not apply).
glibc_floor=2.28
zig_version=0.17.1
zigbuild_version=0.24.1
tools="${VIDSHEET_FFMPEG_CACHE:-$HOME/.cache/vidsheet/ffmpeg}/tools/zig-$zig_version-zigbuild-$zigbuild_version"
if [ ! -f "$tools/.complete" ]; then
  echo "build-native: installing ziglang $zig_version and cargo-zigbuild $zigbuild_version (pip) into $tools" >&2
  rm -rf "$tools"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$tools" "ziglang==$zig_version" "cargo-zigbuild==$zigbuild_version"
  touch "$tools/.complete"
fi
export PATH="$tools/bin:$PATH" PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}"

prefix="$(scripts/build-ffmpeg.sh | tail -n1)"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" PKG_CONFIG_ALL_STATIC=1 \
  "${napi_build[@]}" --target-dir target/static --features static-ffmpeg --strip \
  --cross-compile --target "x86_64-unknown-linux-gnu.$glibc_floor"

rm -rf "$out/THIRD-PARTY-LICENSES"
cp -r "$prefix/licenses" "$out/THIRD-PARTY-LICENSES"
{
  cat "$prefix/build-info.txt"
  # How the binding itself was linked, to relink it the same way.
  echo "binding linked: napi build --features static-ffmpeg --cross-compile --target x86_64-unknown-linux-gnu.$glibc_floor (cargo-zigbuild $zigbuild_version, zig $zig_version, $(rustc --version))"
} >"$out/FFMPEG-BUILD-INFO.txt"
