#!/usr/bin/env bash
# tests/gpu/build_train_bundle.sh: packs the real `mxmaca` binary and the shared libraries
# the GPU machine lacks (CAF, Abseil, oneDNN, UCX, libstdc++, libgomp, ...; not glibc and
# not CUDA, which that machine has) into tests/gpu/bin/mxmaca_bundle.tar.xz, so
# tests/gpu/run_train_checks.sh can run `mxmaca train --device cuda` there end to end (the
# stage actors, their CUDA streams and graphs, the host optimizer) against `--device cpu`
# on the same machine. The GPU machine's glibc must be at least this one's (2.36 here;
# its Python 3.12 image is newer).
# EXTRA_BINARIES: more binaries whose libraries go into lib/ too (gpu_check).
# Usage: bash tests/gpu/build_train_bundle.sh   (after or without a bazel build; ~1 min warm)
set -euo pipefail
cd "$(dirname "$0")/../.."
# BAZEL_OUTPUT_BASE (build_gpu_check.sh passes its own): a private output base, so the
# build does not wait on another engineer's command in the workspace's default server.
ob=(${BAZEL_OUTPUT_BASE:+--output_base="$BAZEL_OUTPUT_BASE"})
bazel "${ob[@]}" build //api:mxmaca >/dev/null
bin="$(bazel "${ob[@]}" info bazel-bin 2>/dev/null)/api/mxmaca"
work="$(mktemp -d)"
stage="$work/mxmaca_bundle"
mkdir -p "$stage/lib" tests/gpu/bin
cp "$bin" "$stage/mxmaca"
chmod u+w "$stage/mxmaca"
strip --strip-debug "$stage/mxmaca" 2>/dev/null || true
# The libraries of mxmaca and of EXTRA_BINARIES (build_gpu_check.sh passes gpu_check).
{ ldd "$bin"; for extra in ${EXTRA_BINARIES:-}; do ldd "$extra"; done; } | awk '/=>/ {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libresolv)\.so|ld-linux|/usr/local/cuda|libcuda\.so|libnvidia' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
nlibs=$(ls "$stage/lib" | wc -l)
tar -C "$work" -cJf tests/gpu/bin/mxmaca_bundle.tar.xz mxmaca_bundle
rm -rf "$work"
echo "built tests/gpu/bin/mxmaca_bundle.tar.xz: $(( $(stat -c %s tests/gpu/bin/mxmaca_bundle.tar.xz) / 1024 )) KiB" \
  "(mxmaca and $nlibs shared libraries: CAF, Abseil, oneDNN, UCX, libstdc++, libgomp, ...)"
