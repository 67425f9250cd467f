#!/usr/bin/env bash
# tests/gpu/build_gpu_check.sh: prepares tests/gpu/bin for a GPU machine (which has the
# CUDA 13 toolkit but no Bazel, Abseil, oneDNN or CAF):
#   - bin/gpu_check: Bazel's //tests/gpu:gpu_check (kernels/cuda built for sm_90a, sm_100a
#     and compute_90 PTX by third_party/cuda/cuda.bzl; host code -O2), the binary CI links;
#   - bin/cpu_reference_losses.txt: the CPU backend's losses the training section compares
#     with (//tests/gpu:cpu_reference, run here);
#   - bin/mxmaca_bundle.tar.xz (build_train_bundle.sh): the real mxmaca plus every shared
#     library mxmaca and gpu_check need that the GPU machine lacks (oneDNN, Abseil, CAF, UCX,
#     libstdc++, ...; not glibc, not CUDA). run_gpu_checks.sh unpacks it and runs gpu_check
#     with its lib/ on LD_LIBRARY_PATH; run_train_checks.sh runs mxmaca from it.
# (Until the transformer layer became the one implementation both backends run, gpu_check
# was linked by nvcc alone from a hand-picked source list; the layer's tensor-, context- and
# expert-parallel forms reach the CPU kernels, so it is now the Bazel-linked binary.)
# A private Bazel output base (BAZEL_OUTPUT_BASE, default ~/.cache/bazel-ob/gpucheck) keeps
# the build from waiting on another command in the workspace's server.
# Usage: bash tests/gpu/build_gpu_check.sh   (from anywhere; minutes on 2 cores when cold)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=tests/gpu/bin
mkdir -p "$OUT"
BAZEL_OB="${BAZEL_OUTPUT_BASE:-$HOME/.cache/bazel-ob/gpucheck}"
ob=(--output_base="$BAZEL_OB")
JOBS="${JOBS:-2}"
command -v bazel >/dev/null || { echo "build_gpu_check.sh needs bazel (build here, carry tests/gpu/bin)" >&2; exit 1; }
echo "building //tests/gpu:gpu_check //tests/gpu:cpu_reference //api:mxmaca (bazel --output_base=$BAZEL_OB)..."
bazel "${ob[@]}" build -j "$JOBS" //tests/gpu:gpu_check //tests/gpu:cpu_reference //api:mxmaca
bin="$(bazel "${ob[@]}" info bazel-bin 2>/dev/null)"
[ -x "$bin/tests/gpu/gpu_check" ] ||
  { echo "no $bin/tests/gpu/gpu_check: was this built without CUDA (HAS_CUDA false)?" >&2; exit 1; }
rm -f "$OUT/gpu_check"
cp "$bin/tests/gpu/gpu_check" "$OUT/gpu_check"
chmod u+w "$OUT/gpu_check"
strip --strip-debug "$OUT/gpu_check" 2>/dev/null || true
echo "writing $OUT/cpu_reference_losses.txt..."
"$bin/tests/gpu/cpu_reference" "$OUT/cpu_reference_losses.txt"
BAZEL_OUTPUT_BASE="$BAZEL_OB" EXTRA_BINARIES="$OUT/gpu_check" bash tests/gpu/build_train_bundle.sh
size=$(du -sb "$OUT" | cut -f1)
echo "$OUT: $((size / 1024)) KiB in all (carried to the GPU machine; must stay < 64 MiB)"
echo "built $OUT/gpu_check: $(( $(stat -c %s "$OUT/gpu_check") / 1024 )) KiB; dynamic libraries:"
ldd "$OUT/gpu_check" | sed 's/^/  /'
