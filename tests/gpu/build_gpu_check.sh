#!/usr/bin/env bash
# tests/gpu/build_gpu_check.sh: builds the self-contained GPU check binary
# tests/gpu/bin/gpu_check with nvcc alone (no Bazel, Abseil or oneDNN), for sm_90a,
# sm_100a and compute_90 PTX — the flags of third_party/cuda/cuda.bzl.
# Linking: cudart static, libstdc++/libgcc static, cuBLASLt DYNAMIC (its static archive
# is hundreds of MiB): the binary finds libcublasLt.so.13 through its rpath
# (/usr/local/cuda/lib64) or LD_LIBRARY_PATH (run_gpu_checks.sh sets both). The GPU
# machine has the same CUDA 13 toolkit.
# It then writes bin/cpu_reference_losses.txt (Bazel's //tests/gpu:cpu_reference) and
# bin/mxmaca_bundle.tar.xz (build_train_bundle.sh: the real mxmaca for run_train_checks.sh;
# SKIP_TRAIN_BUNDLE=1 skips it), so this one command prepares everything run_gpu_checks.sh
# runs.
# Abseil is linked STATICALLY (tests/gpu/absl_static_libs.sh): the model sections
# (gpu_check_training.cc) use layers/device's DeviceGptStage and CudaDeviceKernels, which
# return absl::Status. Of layers/ only what the device stage needs is compiled; two of
# those files (transformer_layer.cc for DropoutKey, moe_layer.cc for the MoE parameter
# registration that gpt_parameters.cc calls) also hold code over kernels/cpu (oneDNN),
# which no path of the check reaches: host objects are built with -ffunction-sections and
# linked with --gc-sections, so those unreachable functions and their references drop out.
# Also writes tests/gpu/bin/cpu_reference_losses.txt (the CPU backend's losses the
# training section compares with) by running the Bazel target tests/gpu:cpu_reference,
# when Bazel is here (not on the GPU machine: carry the file with the binary).
# Usage: bash tests/gpu/build_gpu_check.sh   (from anywhere; ~3-4 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
NVCC="$CUDA_PATH/bin/nvcc"
OUT=tests/gpu/bin
OBJ="$OUT/obj"
mkdir -p "$OBJ"
GENCODE="-gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_90,code=compute_90"
NVFLAGS="-std=c++17 -O3 --expt-relaxed-constexpr --extended-lambda -I. $GENCODE"
HOSTFLAGS="-std=c++17 -O2 -ffp-contract=off -ffunction-sections -fdata-sections -I. -I$CUDA_PATH/include"

compile() {  # compile SRC: one object per source, in the background-friendly form
  local src="$1" obj="$OBJ/$(echo "$1" | tr / _).o" extra=""
  case "$src" in
    *adamw.cu | *rope.cu | *elementwise.cu) extra="-fmad=false" ;;  # as kernels/cuda/BUILD
  esac
  case "$src" in
    *.cu) "$NVCC" $NVFLAGS $extra -c "$src" -o "$obj" || exit 1 ;;
    *.cc) g++ $HOSTFLAGS -c "$src" -o "$obj" || exit 1 ;;
  esac
  echo "  built $src"
}
export -f compile
export NVCC NVFLAGS HOSTFLAGS OBJ

SRCS="kernels/cuda/cuda_check.cc kernels/cuda/gemm.cu kernels/cuda/elementwise.cu \
kernels/cuda/norm.cu kernels/cuda/embedding.cu kernels/cuda/cross_entropy.cu \
kernels/cuda/adamw.cu kernels/cuda/attention.cu kernels/cuda/fused_attention.cu kernels/cuda/rope.cu \
kernels/cuda/arena_plan.cc kernels/cuda/device_arena.cc kernels/cuda/graph_state.cc \
kernels/cuda/graph_cache.cc kernels/cuda/stream_set.cc tests/gpu/gpu_check_graphs.cc \
tests/gpu/gpu_check_main.cc \
tests/gpu/gpu_check_numerics.cc tests/gpu/gpu_check_perf.cc \
layers/device/cuda_device_kernels.cc layers/device/kernel_args.cc \
$(ls layers/device/device_gpt_stage*.cc | grep -v _test.cc | tr '\n' ' ') \
layers/device/cuda_graph_runner.cc \
layers/gpt_config.cc layers/gpt_parameters.cc layers/parameter_store.cc layers/transformer_layer.cc \
layers/moe/moe_layer.cc layers/moe/grouped_experts.cc layers/moe/router.cc layers/flops.cc \
tests/gpu/training_loop.cc tests/gpu/pipeline_loop.cc tests/gpu/reference_losses.cc \
tests/gpu/gpu_check_training.cc"
JOBS="${JOBS:-2}"  # parallel compiles (2 on the shared build machine)
echo "compiling ($JOBS at a time)..."
printf '%s\n' $SRCS | xargs -P "$JOBS" -I{} bash -c 'compile {}'
OBJS=""
for s in $SRCS; do OBJS="$OBJS $OBJ/$(echo "$s" | tr / _).o"; done
ABSL_LINK="$(bash tests/gpu/absl_static_libs.sh)"
# shellcheck disable=SC2086
g++ -o "$OUT/gpu_check" $OBJS $ABSL_LINK -L"$CUDA_PATH/lib64" -lcudart_static -lcublasLt -ldl -lpthread -lrt \
  -static-libstdc++ -static-libgcc -Wl,--gc-sections -Wl,-rpath,"$CUDA_PATH/lib64"
rm -rf "$OBJ"
# The CPU reference losses (tests/gpu:cpu_reference), with this workspace's Bazel.
if command -v bazel >/dev/null; then
  BAZEL_OB="${BAZEL_OUTPUT_BASE:-$HOME/.cache/bazel-ob/gpucheck}"
  echo "writing $OUT/cpu_reference_losses.txt (bazel --output_base=$BAZEL_OB)..."
  bazel --output_base="$BAZEL_OB" build -j "$JOBS" //tests/gpu:cpu_reference
  "$(bazel --output_base="$BAZEL_OB" info bazel-bin 2>/dev/null)/tests/gpu/cpu_reference" \
    "$OUT/cpu_reference_losses.txt"
elif [ -f "$OUT/cpu_reference_losses.txt" ]; then
  echo "no bazel: keeping the carried $OUT/cpu_reference_losses.txt"
else
  echo "WARNING: no bazel and no $OUT/cpu_reference_losses.txt: the training section will fail" >&2
fi
# The real mxmaca for run_train_checks.sh (needs bazel; skipped on the GPU machine).
if command -v bazel >/dev/null && [ "${SKIP_TRAIN_BUNDLE:-0}" != 1 ]; then
  BAZEL_OUTPUT_BASE="${BAZEL_OUTPUT_BASE:-$HOME/.cache/bazel-ob/gpucheck}" bash tests/gpu/build_train_bundle.sh
fi
size=$(du -sb "$OUT" | cut -f1)
echo "$OUT: $((size / 1024)) KiB in all (carried to the GPU machine; must stay < 64 MiB)"
size=$(stat -c %s "$OUT/gpu_check")
echo "built $OUT/gpu_check: $((size / 1024)) KiB; dynamic libraries:"
ldd "$OUT/gpu_check" | sed 's/^/  /'
