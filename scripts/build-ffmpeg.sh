#!/usr/bin/env bash
# Builds the minimal LGPL FFmpeg that the self-contained native binding links statically (issue 14),
# from Debian's own source packages (deb.debian.org is reachable where GitHub is not):
#   zlib   (zlib licence)  static, for the PNG/APNG/TIFF/... decoders, MOV `cmov` and Matroska zlib
#   dav1d  (BSD-2-Clause)  static, the AV1 decoder (FFmpeg 5.1's native `av1` needs a GPU hwaccel)
#   ffmpeg (LGPL-2.1+)     static avutil, avcodec, avformat, swscale, swresample: every decoder,
#                          demuxer, parser and bitstream filter; the `file` protocol only; no
#                          encoders, muxers, devices, filters, postproc, network, programs or docs;
#                          x86 asm on (nasm).
# vidsheet-core enables ffmpeg-next's `codec`, `format` and `software-scaling` (libavcodec,
# libavformat, libswscale, libavutil); libswresample is built too because FFmpeg 5.1's native Opus
# decoder depends on it (without it Opus audio in WebM/MKV/MP4 would not decode).
#
# The result goes to ${VIDSHEET_FFMPEG_CACHE:-$HOME/.cache/vidsheet/ffmpeg}/<key>, where <key> is the
# sha256 of the three source package versions (with their .dsc hashes), the exact configure lines,
# the architecture and the build-relevant part of this script. When that prefix is already complete
# (its `.complete` marker is written last) nothing is rebuilt. The prefix is always the last line on
# stdout; everything else goes to stderr. The prefix also holds build-info.txt (source versions,
# .dsc URIs, configure lines) and licenses/ (FFmpeg's COPYING.LGPLv2.1, dav1d's and zlib's licences,
# Debian's copyright files), to ship with the binding.
#
#   scripts/build-ffmpeg.sh          build if needed, print the prefix
#   scripts/build-ffmpeg.sh --key    print only the cache key (e.g. for a CI cache), build nothing
#
# Link the binding against it (a separate target dir keeps the system-FFmpeg dev build untouched):
#   prefix=$(scripts/build-ffmpeg.sh | tail -n1)
#   PKG_CONFIG_PATH=$prefix/lib/pkgconfig PKG_CONFIG_ALL_STATIC=1 CARGO_TARGET_DIR=target/static \
#     cargo build --release -p vidsheet-node --features static-ffmpeg
#
# Needs apt-get with a deb-src entry (added here when missing) and installs only nasm, meson,
# ninja-build, pkg-config, make, gcc and dpkg-dev when missing: no `apt-get build-dep`.
# Env: VIDSHEET_FFMPEG_CACHE (cache root), VIDSHEET_FFMPEG_JOBS (make/ninja -j, default nproc),
# VIDSHEET_FFMPEG_WORK (keep the sources and build trees there instead of a removed temp dir).
set -euo pipefail

log() { echo "build-ffmpeg: $*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

mode=build
case "${1:-}" in
  "") ;;
  --key) mode=key ;;
  *) echo "usage: $0 [--key]" >&2; exit 2 ;;
esac

script_path="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
cache_root="${VIDSHEET_FFMPEG_CACHE:-$HOME/.cache/vidsheet/ffmpeg}"
jobs="${VIDSHEET_FFMPEG_JOBS:-$(nproc)}"

# deb-src: `apt-get source` needs one. deb822 files get `Types: deb deb-src`; one-line
# sources.list entries get a matching `deb-src` line.
ensure_deb_src() {
  if apt-get source --print-uris -qq zlib >/dev/null 2>&1; then return; fi
  log "adding deb-src entries to the apt sources"
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    as_root sed -i -E 's/^Types:[[:space:]]+deb[[:space:]]*$/Types: deb deb-src/' "$f"
  done
  if [ -f /etc/apt/sources.list ] && grep -qE '^deb[[:space:]]' /etc/apt/sources.list; then
    local line
    grep -E '^deb[[:space:]]' /etc/apt/sources.list | while IFS= read -r line; do
      grep -qxF "deb-src${line#deb}" /etc/apt/sources.list || echo "deb-src${line#deb}"
    done | as_root tee -a /etc/apt/sources.list >/dev/null
  fi
  as_root apt-get update -qq
}

# The source package apt would fetch: "<dsc file name> <sha256> <dsc uri>".
source_identity() {
  apt-get source --print-uris -qq --only-source "$1" |
    awk '$2 ~ /\.dsc$/ { gsub("\x27", "", $1); sub("^SHA256:", "", $4); print $2, $4, $1; exit }'
}

ensure_deb_src
zlib_src="$(source_identity zlib)"
dav1d_src="$(source_identity dav1d)"
ffmpeg_src="$(source_identity ffmpeg)"
for s in "$zlib_src" "$dav1d_src" "$ffmpeg_src"; do
  [ -n "$s" ] || { log "apt-get source --print-uris found no source package (zlib, dav1d, ffmpeg)"; exit 1; }
done
# "ffmpeg_5.1.6-0+deb12u1.dsc" -> "5.1.6-0+deb12u1"
dsc_version() { local n="${1%% *}"; n="${n%.dsc}"; echo "${n#*_}"; }

# BEGIN build-relevant (everything down to END is hashed into the cache key)
zlib_configure=(--static)
zlib_cflags="-O2 -fPIC"
dav1d_meson=(--buildtype=release --default-library=static -Db_staticpic=true
  -Denable_tools=false -Denable_tests=false -Denable_examples=false)
ffmpeg_configure=(
  --disable-gpl --disable-nonfree --disable-version3
  --disable-network --disable-autodetect --disable-programs --disable-doc
  --enable-pic --enable-static --disable-shared --disable-debug
  --enable-x86asm --enable-pthreads --enable-iconv --enable-zlib --enable-libdav1d
  --disable-avdevice --disable-avfilter --disable-postproc
  --disable-encoders --disable-muxers --disable-devices --disable-hwaccels
  --disable-protocols --enable-protocol=file
)

build_zlib() { # $1 prefix
  CFLAGS="$zlib_cflags" ./configure --prefix="$1" --libdir="$1/lib" "${zlib_configure[@]}" >&2
  make -j"$jobs" libz.a >&2
  make install >&2
}

build_dav1d() { # $1 prefix
  meson setup build --prefix="$1" --libdir=lib "${dav1d_meson[@]}" >&2
  ninja -C build -j"$jobs" install >&2
}

build_ffmpeg() { # $1 prefix
  # Only our own .pc files (dav1d, zlib) are seen; zlib is probed with plain -lz, hence -I/-L.
  PKG_CONFIG_LIBDIR="$1/lib/pkgconfig" PKG_CONFIG_PATH="" ./configure --prefix="$1" \
    --pkg-config-flags=--static --extra-cflags="-I$1/include" --extra-ldflags="-L$1/lib" \
    "${ffmpeg_configure[@]}" >&2
  make -j"$jobs" >&2
  make install >&2
}
# END build-relevant

key="$(
  {
    echo "arch=$(uname -m)"
    echo "zlib=${zlib_src% *}"
    echo "dav1d=${dav1d_src% *}"
    echo "ffmpeg=${ffmpeg_src% *}"
    echo "zlib_configure=CFLAGS=$zlib_cflags ${zlib_configure[*]}"
    echo "dav1d_meson=${dav1d_meson[*]}"
    echo "ffmpeg_configure=${ffmpeg_configure[*]}"
    sed -n '/^# BEGIN build-relevant/,/^# END build-relevant/p' "$script_path" | grep -vE '^[[:space:]]*(#|$)'
  } | sha256sum | cut -c1-64
)"
if [ "$mode" = key ]; then
  echo "$key"
  exit 0
fi

prefix="$cache_root/$key"
if [ -f "$prefix/.complete" ]; then
  log "cached: ffmpeg $(dsc_version "$ffmpeg_src"), dav1d $(dsc_version "$dav1d_src"), zlib $(dsc_version "$zlib_src")"
  echo "$prefix"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock-$key"
if ! flock -n 9; then
  log "another build of $key is running; waiting for it"
  flock 9
fi
if [ -f "$prefix/.complete" ]; then # finished while we waited
  echo "$prefix"
  exit 0
fi
rm -rf "$prefix" # an interrupted build: start over

missing=()
for p in nasm meson ninja-build pkg-config make gcc dpkg-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}" >&2
fi

if [ -n "${VIDSHEET_FFMPEG_WORK:-}" ]; then
  work="$VIDSHEET_FFMPEG_WORK"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/vidsheet-ffmpeg.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
work="$(cd "$work" && pwd)"

t0=$SECONDS
# Fetch and unpack (with Debian's patches applied) the source packages, and check they are the
# ones hashed into the key (an `apt-get update` in between could have moved them).
fetch() { # $1 package, $2 identity -> prints the unpacked directory
  local version dir
  version="$(dsc_version "$2")"
  (cd "$work" && apt-get source -qq --only-source "$1" >&2)
  [ "$(sha256sum <"$work/${2%% *}" | cut -c1-64)" = "$(echo "$2" | cut -d' ' -f2)" ] || {
    log "$1: the downloaded ${2%% *} is not the one in the key; run again"
    exit 1
  }
  dir="$work/$1-${version%-*}" # dpkg-source unpacks into <package>-<upstream version>
  [ -d "$dir" ] || { log "$1: $dir not found after apt-get source"; exit 1; }
  echo "$dir"
}
zlib_dir="$(fetch zlib "$zlib_src")"
dav1d_dir="$(fetch dav1d "$dav1d_src")"
ffmpeg_dir="$(fetch ffmpeg "$ffmpeg_src")"
log "sources fetched in $((SECONDS - t0)) s: $zlib_dir $dav1d_dir $ffmpeg_dir"

mkdir -p "$prefix"
t=$SECONDS; (cd "$zlib_dir" && build_zlib "$prefix"); log "zlib built in $((SECONDS - t)) s"
t=$SECONDS; (cd "$dav1d_dir" && build_dav1d "$prefix"); log "dav1d built in $((SECONDS - t)) s"
t=$SECONDS; (cd "$ffmpeg_dir" && build_ffmpeg "$prefix"); log "ffmpeg built in $((SECONDS - t)) s"

# What was built, from what, and the licences to ship with the binding.
mkdir -p "$prefix/licenses"
cp "$ffmpeg_dir/COPYING.LGPLv2.1" "$prefix/licenses/ffmpeg-COPYING.LGPLv2.1"
cp "$ffmpeg_dir/LICENSE.md" "$prefix/licenses/ffmpeg-LICENSE.md"
cp "$ffmpeg_dir/debian/copyright" "$prefix/licenses/ffmpeg-debian-copyright"
cp "$dav1d_dir/COPYING" "$prefix/licenses/dav1d-COPYING"
cp "$dav1d_dir/debian/copyright" "$prefix/licenses/dav1d-debian-copyright"
sed -n '/^Copyright notice:/,$p' "$zlib_dir/README" >"$prefix/licenses/zlib-LICENSE"
cp "$zlib_dir/debian/copyright" "$prefix/licenses/zlib-debian-copyright"
{
  echo "key: $key"
  echo "arch: $(uname -m)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0)) s with $(cc --version | head -n1), nasm $(nasm -v | awk '{print $3}')"
  echo "ffmpeg: $(dsc_version "$ffmpeg_src") (Debian source package; .dsc ${ffmpeg_src#* })"
  echo "dav1d: $(dsc_version "$dav1d_src") (Debian source package; .dsc ${dav1d_src#* })"
  echo "zlib: $(dsc_version "$zlib_src") (Debian source package; .dsc ${zlib_src#* })"
  echo "ffmpeg configure: ./configure --prefix=$prefix --pkg-config-flags=--static --extra-cflags=-I$prefix/include --extra-ldflags=-L$prefix/lib ${ffmpeg_configure[*]}"
  echo "dav1d meson: meson setup build --prefix=$prefix --libdir=lib ${dav1d_meson[*]}"
  echo "zlib configure: CFLAGS='$zlib_cflags' ./configure --prefix=$prefix --libdir=$prefix/lib ${zlib_configure[*]}"
} >"$prefix/build-info.txt"
cp "$ffmpeg_dir/ffbuild/config.mak" "$prefix/ffmpeg-config.mak"
touch "$prefix/.complete"
log "done in $((SECONDS - t0)) s"
echo "$prefix"
