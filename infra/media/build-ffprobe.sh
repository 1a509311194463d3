#!/bin/sh
# Builds the control plane's ffprobe: FFmpeg's own ffprobe, from the source of Debian's ffmpeg package
# (the same upstream release, fetched from the Debian archive and checked against the checksum of its
# signed .dsc), configured with only what reading an uploaded video or photo needs. Two reasons:
#   - Debian's ffprobe links 215 shared libraries and spends 70-80 ms of CPU resolving their symbols
#     before it reads a byte, most of a probe's cost; this one links 13 and starts in 2-3 ms;
#   - a probe reads untrusted uploads: this one has the demuxers and decoders of the accepted media
#     types (control-plane/src/modules/media/schema.ts) and HTTP(S), nothing else.
# ffmpeg itself (thumbnails, the sandbox's clips) stays Debian's. When Debian's ffmpeg moves to a new
# release, move VERSION and SHA256 with it: control-plane/test/media-probe.test.ts fails until then.
#
#   infra/media/build-ffprobe.sh <output file>
# Needs gcc, libc6-dev, make, pkg-config, curl, xz-utils, zlib1g-dev and libgnutls28-dev. The native
# runner builds it into .stack/bin (again when this file changes); infra/Dockerfile into the image.
# A failed build leaves configure.log and make.log beside the output file.
set -eu

VERSION=5.1.9
SHA256=d9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176
TARBALL="ffmpeg_${VERSION}.orig.tar.xz"
# The archive's pool keeps a release while a suite has it; Debian's snapshot archive keeps every file
# for good, by its SHA-1 (SHA256 is what is checked either way).
URLS="http://deb.debian.org/debian/pool/main/f/ffmpeg/${TARBALL}
http://snapshot.debian.org/file/c42a24a256e3e9f4b989835bcd1e3b1dbe9bb853"

# The accepted types' demuxers (configure's names: png_pipe is image_png_pipe); apng too, only so that
# an animated PNG is told apart from png_pipe as Debian's ffprobe does (and refused, off the list).
DEMUXERS=mov,matroska,image_png_pipe,image_jpeg_pipe,image_webp_pipe,gif,apng
# Their decoders, and parsers, which read a stream's parameters without decoding much.
DECODERS=h264,hevc,vp8,vp9,aac,mp3,opus,vorbis,flac,png,mjpeg,webp,gif
PARSERS=h264,hevc,vp8,vp9,av1,aac,opus,vorbis,flac,mpegaudio,png,mjpeg,webp,gif

out=${1:?usage: build-ffprobe.sh <output file>}
case $out in /*) ;; *) out="$PWD/$out" ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dash runs the EXIT trap on exit only: make a signal exit too.
trap 'exit 1' INT TERM HUP

fetched=
for url in $URLS; do
  if curl -fsS --retry 3 -o "$work/$TARBALL" "$url"; then
    fetched=$url
    break
  fi
done
[ -n "$fetched" ] || { echo "could not download $TARBALL from the Debian archive" >&2; exit 1; }
echo "$SHA256  $work/$TARBALL" | sha256sum -c --quiet -
tar -xJf "$work/$TARBALL" -C "$work"
cd "$work/ffmpeg-$VERSION"

failed() {
  cp configure.log make.log "$(dirname "$out")/" 2>/dev/null || true
  echo "ffprobe's $1 failed; its log is in $(dirname "$out")/$1.log" >&2
  exit 1
}
# No x86asm: the probe decodes a frame at most, and nasm would be one more package to install.
./configure --disable-everything --disable-autodetect --disable-doc --disable-debug \
  --disable-ffmpeg --disable-ffplay --enable-ffprobe \
  --disable-avdevice --disable-avfilter --disable-postproc --disable-swscale --disable-x86asm \
  --enable-zlib --enable-gnutls --enable-protocol=http,https,tcp,tls \
  --enable-demuxer="$DEMUXERS" --enable-decoder="$DECODERS" --enable-parser="$PARSERS" >configure.log 2>&1 ||
  failed configure
make -j"$(nproc)" ffprobe >make.log 2>&1 || failed make
./ffprobe -version >/dev/null
install -m 755 ffprobe "$out"
