#!/usr/bin/env bash
# tests/gpu/build_gpu_check.sh: builds the self-contained GPU check binary
# tests/gpu/bin/gpu_check with nvcc alone (no Bazel, Abseil or oneDNN), for sm_90a,
# sm_100a and compute_90 PTX — the flags of third_party/cuda/cuda.bzl.
# Linking: cudart static, libstdc++/libgcc static, cuBLASLt DYNAMIC (its static archive
# is hundreds of MiB): the binary finds libcublasLt.so.13 through its rpath
# (/usr/local/cuda/lib64) or LD_LIBRARY_PATH (run_gpu_checks.sh sets both). The GPU
# machine has the same CUDA 13 toolkit.
# Usage: bash tests/gpu/build_gpu_check.sh   (from anywhere; ~1-2 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
NVCC="$CUDA_PATH/bin/nvcc"
OUT=tests/gpu/bin
OBJ="$OUT/obj"
mkdir -p "$OBJ"
GENCODE="-gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_90,code=compute_90"
NVFLAGS="-std=c++17 -O3 --expt-relaxed-constexpr --extended-lambda -I. $GENCODE"
HOSTFLAGS="-std=c++17 -O2 -ffp-contract=off -I. -I$CUDA_PATH/include"

compile() {  # compile SRC: one object per source, in the background-friendly form
  local src="$1" obj="$OBJ/$(echo "$1" | tr / _).o" extra=""
  case "$src" in
    *adamw.cu | *rope.cu) extra="-fmad=false" ;;  # as kernels/cuda/BUILD
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
tests/gpu/gpu_check_numerics.cc tests/gpu/gpu_check_perf.cc"
JOBS="${JOBS:-2}"  # parallel compiles (2 on the shared build machine)
echo "compiling ($JOBS at a time)..."
printf '%s\n' $SRCS | xargs -P "$JOBS" -I{} bash -c 'compile {}'
OBJS=""
for s in $SRCS; do OBJS="$OBJS $OBJ/$(echo "$s" | tr / _).o"; done
g++ -o "$OUT/gpu_check" $OBJS -L"$CUDA_PATH/lib64" -lcudart_static -lcublasLt -ldl -lpthread -lrt \
  -static-libstdc++ -static-libgcc -Wl,-rpath,"$CUDA_PATH/lib64"
rm -rf "$OBJ"
size=$(stat -c %s "$OUT/gpu_check")
echo "built $OUT/gpu_check: $((size / 1024)) KiB; dynamic libraries:"
ldd "$OUT/gpu_check" | sed 's/^/  /'
