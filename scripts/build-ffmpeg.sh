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
# Each source package is the newest version apt lists whose files can be fetched and match its .dsc
# (see resolve_source). The result goes to ${VIDSHEET_FFMPEG_CACHE:-$HOME/.cache/vidsheet/ffmpeg}/<key>,
# where <key> is the sha256 of the fetched versions and their .dsc files' hashes, the exact configure lines,
# the architecture and the build-relevant part of this script. When that prefix is already complete
# (its `.complete` marker is written last) nothing is rebuilt. The prefix is always the last line on
# stdout; everything else goes to stderr. The prefix also holds build-info.txt (source versions,
# .dsc hashes and URIs, newer versions skipped, configure lines) and licenses/ (FFmpeg's COPYING.LGPLv2.1, dav1d's and zlib's licences,
# Debian's copyright files), to ship with the binding.
#
#   scripts/build-ffmpeg.sh          build if needed, print the prefix
#   scripts/build-ffmpeg.sh --key      print only the cache key (e.g. for a CI cache), build nothing
#   scripts/build-ffmpeg.sh --sources  print the source versions it would build and their .dsc hashes
# Both fetch the source packages (into the cache root's sources/) to know which versions can be had.
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
  --sources) mode=sources ;;
  *) echo "usage: $0 [--key | --sources]" >&2; exit 2 ;;
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

# Which version of each source package to build: the newest that apt lists (any suite) whose files
# can be fetched and whose every file matches the sha256 its .dsc lists. A listed version is not
# always downloadable (a security update is indexed before its sources reach the mirror), so older
# listed versions are tried in turn. Fetched packages stay in $cache_root/sources, where apt-get
# skips files it already has: a later run downloads nothing it has, offline too.
src_cache="$cache_root/sources"
apt_sandbox=() # as root, apt's download user cannot write to the cache: fetch as root, quietly
[ "$(id -u)" -ne 0 ] || apt_sandbox=(-o APT::Sandbox::User=root)

listed_versions() { # $1 package -> its source versions, newest first (Debian order)
  local v sorted=() i
  while IFS= read -r v; do
    for ((i = ${#sorted[@]}; i > 0; i--)); do
      dpkg --compare-versions "$v" gt "${sorted[i - 1]}" || break
      sorted[i]="${sorted[i - 1]}"
    done
    sorted[i]="$v"
  done < <(apt-cache showsrc --only-source "$1" 2>/dev/null |
    awk -v p="$1" '/^Package: /{ n = $2 } /^Version: / && n == p { print $2 }' | sort -u)
  ((${#sorted[@]})) && printf '%s\n' "${sorted[@]}"
}

dsc_matches() { # $1 .dsc: every file it lists is there with its sha256
  local dir listed
  dir="$(dirname "$1")"
  listed="$(awk '/^Checksums-Sha256:/ { f = 1; next } /^[^ ]/ { f = 0 } f && NF == 3 { print $1 "  " $3 }' "$1")"
  [ -n "$listed" ] && (cd "$dir" && sha256sum --check --quiet --strict <<<"$listed" >/dev/null 2>&1)
}

# Fetches the package; prints "<version> <sha256 of its .dsc> <.dsc path>", the newest that works.
resolve_source() { # $1 package
  local version dir dsc tried=()
  while IFS= read -r version; do
    dir="$src_cache/$1/${version//:/%3a}"
    mkdir -p "$dir"
    if ! (cd "$dir" && apt-get "${apt_sandbox[@]}" source --download-only -qq --only-source "$1=$version" >&2); then
      tried+=("$version: could not be fetched")
      rm -rf "$dir"
      continue
    fi
    dsc="$(find "$dir" -maxdepth 1 -name '*.dsc' | head -n1)"
    if [ -z "$dsc" ] || ! dsc_matches "$dsc"; then
      tried+=("$version: its files do not match its .dsc")
      rm -rf "$dir"
      continue
    fi
    find "$src_cache/$1" -mindepth 1 -maxdepth 1 ! -path "$dir" -exec rm -rf {} + # older fetches
    if ((${#tried[@]})); then
      log "$1: using $version; newer: ${tried[*]}"
      printf '%s\n' "${tried[@]}" >"$dir/.newer-skipped"
    else
      rm -f "$dir/.newer-skipped"
    fi
    echo "$version $(sha256sum <"$dsc" | cut -c1-64) $dsc"
    return 0
  done < <(listed_versions "$1")
  log "$1: no version apt lists could be fetched and matched its .dsc (${tried[*]:-apt lists none})"
  return 1
}

resolve_all() {
  zlib_src="$(resolve_source zlib)" && dav1d_src="$(resolve_source dav1d)" &&
    ffmpeg_src="$(resolve_source ffmpeg)"
}
ensure_deb_src
if ! resolve_all; then # apt's lists may be older than the mirror: refresh them once
  log "refreshing apt's package lists and trying again"
  as_root apt-get update -qq
  resolve_all
fi
if [ "$mode" = sources ]; then
  printf '%s %s\n' zlib "${zlib_src% *}" dav1d "${dav1d_src% *}" ffmpeg "${ffmpeg_src% *}"
  exit 0
fi

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
  log "cached: ffmpeg ${ffmpeg_src%% *}, dav1d ${dav1d_src%% *}, zlib ${zlib_src%% *}"
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
# Unpack (with Debian's patches applied) the source packages resolved above.
unpack() { # $1 package, $2 resolved source -> prints the unpacked directory
  rm -rf "${work:?}/$1"
  (cd "$work" && dpkg-source --no-copy -x "${2##* }" "$1" >&2)
  echo "$work/$1"
}
zlib_dir="$(unpack zlib "$zlib_src")"
dav1d_dir="$(unpack dav1d "$dav1d_src")"
ffmpeg_dir="$(unpack ffmpeg "$ffmpeg_src")"
log "sources unpacked in $((SECONDS - t0)) s: $zlib_dir $dav1d_dir $ffmpeg_dir"

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
source_line() { # $1 package, $2 resolved source -> version, .dsc hash, where from, what was skipped
  local version="${2%% *}" rest="${2#* }" uri skipped
  uri="$(apt-get source --print-uris -qq --only-source "$1=$version" 2>/dev/null |
    awk '$2 ~ /\.dsc$/ { gsub("\x27", "", $1); print $1; exit }')"
  skipped="$(paste -sd ';' "$(dirname "${2##* }")/.newer-skipped" 2>/dev/null || true)"
  # The version as the .dsc's name writes it (no epoch): "ffmpeg_5.1.9-0+deb12u1.dsc" -> "5.1.9-0+deb12u1"
  local dsc_name="${2##*/}"
  dsc_name="${dsc_name%.dsc}"
  echo "${dsc_name#*_} (Debian source package $version; .dsc sha256 ${rest%% *}${uri:+, $uri})${skipped:+; newer versions apt lists were skipped: $skipped}"
}
{
  echo "key: $key"
  echo "arch: $(uname -m)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0)) s with $(cc --version | head -n1), nasm $(nasm -v | awk '{print $3}')"
  echo "ffmpeg: $(source_line ffmpeg "$ffmpeg_src")"
  echo "dav1d: $(source_line dav1d "$dav1d_src")"
  echo "zlib: $(source_line zlib "$zlib_src")"
  echo "ffmpeg configure: ./configure --prefix=$prefix --pkg-config-flags=--static --extra-cflags=-I$prefix/include --extra-ldflags=-L$prefix/lib ${ffmpeg_configure[*]}"
  echo "dav1d meson: meson setup build --prefix=$prefix --libdir=lib ${dav1d_meson[*]}"
  echo "zlib configure: CFLAGS='$zlib_cflags' ./configure --prefix=$prefix --libdir=$prefix/lib ${zlib_configure[*]}"
} >"$prefix/build-info.txt"
cp "$ffmpeg_dir/ffbuild/config.mak" "$prefix/ffmpeg-config.mak"
touch "$prefix/.complete"
log "done in $((SECONDS - t0)) s"
echo "$prefix"
