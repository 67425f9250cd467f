#!/usr/bin/env bash
# tests/gpu/run_gpu_checks.sh: runs the kernels/cuda check on a GPU machine and prints
# the table (numerics against fp64 references, then throughput against the measured
# cuBLASLt bf16 peak and copy bandwidth, then the model sections: 20 training steps vs the
# CPU backend's losses, a 2-stage pipeline with CUDA graphs off/on, and GPT h2048 L24
# training throughput and MFU; tests/gpu/README.md), then, when
# tests/gpu/bin/mxmaca_bundle.tar.xz is there (bash tests/gpu/build_train_bundle.sh), the
# real `mxmaca train --device cuda` against `--device cpu` (run_train_checks.sh, < 4 min).
# Takes under 9 minutes on an H200: run it with the device tool's timeout_s 560.
#
# Needs tests/gpu/bin/gpu_check and tests/gpu/bin/cpu_reference_losses.txt (bash
# tests/gpu/build_gpu_check.sh here writes both; carry tests/gpu/bin to the GPU machine).
# If the binary is missing and nvcc is there, it is built first (without Bazel there is
# no CPU reference to write: the training rows then fail with the missing file's name).
# libcublasLt.so.13 is looked up in $CUDA_PATH/lib64, /usr/local/cuda/lib64 and the pip
# "nvidia-cublas" wheel that PyTorch installs.
# Usage: bash tests/gpu/run_gpu_checks.sh [--quick] [--numerics-only | --perf-only |
#        --training-only] [--no-throughput]
# Writes a copy of the output to $OUT/gpu_check.txt when OUT is set.
# Exit status: the binary's (0 pass, 1 fail, 2 no GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=tests/gpu/bin/gpu_check
CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$BIN" ]; then
  if [ -x "$CUDA_PATH/bin/nvcc" ]; then
    echo "$BIN missing: building it with $CUDA_PATH/bin/nvcc"
    JOBS=$(nproc) bash tests/gpu/build_gpu_check.sh || exit 1
  else
    echo "$BIN missing and no nvcc: run bash tests/gpu/build_gpu_check.sh and carry tests/gpu/bin" >&2
    exit 1
  fi
fi
libdirs="$CUDA_PATH/lib64:/usr/local/cuda/lib64"
for py in python3 /usr/bin/python3; do
  d=$("$py" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null) &&
    libdirs="$libdirs:$d" && break
  d=$("$py" -c 'import nvidia, os, glob; print(":".join(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib"))))' 2>/dev/null) &&
    [ -n "$d" ] && libdirs="$libdirs:$d" && break
done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! ldd "$BIN" | grep -q 'libcublasLt.so.13 => /'; then
  echo "libcublasLt.so.13 not found (searched $libdirs)" >&2
  exit 1
fi
[ -f tests/gpu/bin/cpu_reference_losses.txt ] ||
  echo "WARNING: tests/gpu/bin/cpu_reference_losses.txt missing: the training rows will fail" >&2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
log="${OUT:+$OUT/gpu_check.txt}"
if [ -n "$log" ]; then
  timeout 290 "$BIN" "$@" 2>&1 | tee "$log"
else
  timeout 290 "$BIN" "$@" 2>&1
fi
rc=${PIPESTATUS[0]}
echo "gpu_check exit status: $rc"
[ "$rc" = 2 ] && exit 2  # no GPU
if [ -f tests/gpu/bin/mxmaca_bundle.tar.xz ]; then
  quick=""
  for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done
  if [ -n "$log" ]; then
    timeout 240 bash tests/gpu/run_train_checks.sh $quick 2>&1 | tee "$OUT/train_check.txt"
  else
    timeout 240 bash tests/gpu/run_train_checks.sh $quick 2>&1
  fi
  trc=${PIPESTATUS[0]}
  echo "train checks exit status: $trc"
  [ "$rc" = 0 ] && rc=$trc
else
  echo "(no tests/gpu/bin/mxmaca_bundle.tar.xz: mxmaca train --device cuda not checked)"
fi
exit "$rc"
