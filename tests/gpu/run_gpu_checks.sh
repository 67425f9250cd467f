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
# Needs tests/gpu/bin/gpu_check, tests/gpu/bin/cpu_reference_losses.txt and
# tests/gpu/bin/mxmaca_bundle.tar.xz (bash tests/gpu/build_gpu_check.sh here writes all
# three; carry tests/gpu/bin to the GPU machine).
# gpu_check runs with the bundle's lib/ (unpacked to $TMPDIR) on LD_LIBRARY_PATH.
# libcublasLt.so.13 is looked up in $CUDA_PATH/lib64, /usr/local/cuda/lib64 and the pip
# "nvidia-cublas" wheel that PyTorch installs.
# Usage: bash tests/gpu/run_gpu_checks.sh [--quick] [--numerics-only | --perf-only |
#        --training-only | --throughput-only] [--no-throughput]
# Without a section flag the binary runs four times, one process per part (numerics +
# graph cache 75 s, kernel throughput 60 s, training + pipeline 90 s, model throughput the
# rest of 290 s), so a lost CUDA context or a hang ends only its part.
# Writes a copy of the output to $OUT/gpu_check.txt (appended as it comes) when OUT is set;
# run_train_checks.sh writes $OUT/train_check.txt and $OUT/train_runs.log (every run's log).
# Exit status: the binary's (0 pass, 1 fail, 2 no GPU).
set -uo pipefail
[ -n "${OUT:-}" ] && OUT="$(cd "$OUT" && pwd)" && export OUT  # absolute: the train checks cd
cd "$(dirname "$0")/../.."
BIN=tests/gpu/bin/gpu_check
CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$BIN" ] || [ ! -f tests/gpu/bin/mxmaca_bundle.tar.xz ]; then
  echo "$BIN or tests/gpu/bin/mxmaca_bundle.tar.xz missing: run bash tests/gpu/build_gpu_check.sh" \
    "where Bazel is and carry tests/gpu/bin" >&2
  exit 1
fi
# gpu_check's shared libraries (oneDNN, Abseil, libstdc++, ...) come from the bundle.
bundle_dir="${TMPDIR:-/tmp}/mxmaca_gpu_check_libs"
rm -rf "$bundle_dir" && mkdir -p "$bundle_dir" &&
  tar -C "$bundle_dir" -xJf tests/gpu/bin/mxmaca_bundle.tar.xz ||
  { echo "cannot unpack tests/gpu/bin/mxmaca_bundle.tar.xz into $bundle_dir" >&2; exit 1; }
libdirs="$bundle_dir/mxmaca_bundle/lib:$CUDA_PATH/lib64:/usr/local/cuda/lib64"
for py in python3 /usr/bin/python3; do
  d=$("$py" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null) &&
    libdirs="$libdirs:$d" && break
  d=$("$py" -c 'import nvidia, os, glob; print(":".join(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib"))))' 2>/dev/null) &&
    [ -n "$d" ] && libdirs="$libdirs:$d" && break
done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! ldd "$BIN" | grep 'libcublasLt.so.13 => /' > /dev/null; then  # not grep -q: with pipefail, ldd's SIGPIPE would fail the test
  echo "libcublasLt.so.13 not found (searched $libdirs)" >&2
  exit 1
fi
[ -f tests/gpu/bin/cpu_reference_losses.txt ] ||
  echo "WARNING: tests/gpu/bin/cpu_reference_losses.txt missing: the training rows will fail" >&2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
log="${OUT:+$OUT/gpu_check.txt}"
[ -n "$log" ] && : > "$log"
# part LIMIT ARGS...: one gpu_check process under its own timeout, its output appended to
# $log as it comes (line-buffered); sets prc to its exit status (124: timed out).
part() {
  local limit="$1"; shift
  echo "### gpu_check $* (timeout ${limit} s)" | { if [ -n "$log" ]; then tee -a "$log"; else cat; fi; }
  if [ -n "$log" ]; then
    timeout -k 10 "$limit" "$BIN" "$@" 2>&1 | tee -a "$log"
  else
    timeout -k 10 "$limit" "$BIN" "$@" 2>&1
  fi
  prc=${PIPESTATUS[0]}
  local note=""
  [ "$prc" = 124 ] || [ "$prc" = 137 ] && note=" (TIMED OUT after ${limit} s: the last lines above show where)"
  echo "### gpu_check $* exit status: $prc$note" | { if [ -n "$log" ]; then tee -a "$log"; else cat; fi; }
}
# The sections run as separate processes (each its own CUDA context and timeout), so a
# lost context (illegal address) or a hang in one section cannot take the others with it;
# together they stay within 290 s. An explicit section flag runs that one process only.
budget=290
t_start=$SECONDS
single=0
for a in "$@"; do
  case "$a" in --numerics-only | --perf-only | --training-only | --throughput-only) single=1 ;; esac
done
rc=0
if [ "$single" = 1 ]; then
  part "$budget" "$@"
  rc=$prc
else
  part 75 --numerics-only "$@"
  [ "$prc" = 2 ] && exit 2  # no GPU
  [ "$prc" = 0 ] || rc=1
  part 60 --perf-only "$@"
  [ "$prc" = 0 ] || rc=1
  part 90 --training-only --no-throughput "$@"
  [ "$prc" = 0 ] || rc=1
  notp=0
  for a in "$@"; do [ "$a" = --no-throughput ] && notp=1; done
  if [ "$notp" = 0 ]; then
    left=$((budget - (SECONDS - t_start)))
    [ "$left" -lt 60 ] && left=60
    part "$left" --throughput-only "$@"
    [ "$prc" = 0 ] || rc=1
  fi
fi
echo "gpu_check exit status: $rc ($((SECONDS - t_start)) s)"
[ "$rc" = 2 ] && exit 2  # no GPU
if [ -f tests/gpu/bin/mxmaca_bundle.tar.xz ]; then
  quick=""
  for a in "$@"; do [ "$a" = --quick ] && quick=--quick; done
  # 240 s, or less when the gpu_check parts ran long: the whole script stays under ~540 s
  # (the device tool's timeout_s 560).
  tlimit=$((535 - SECONDS))
  [ "$tlimit" -gt 240 ] && tlimit=240
  [ "$tlimit" -lt 60 ] && tlimit=60
  echo "== run_train_checks.sh (timeout $tlimit s) =="
  if [ -n "$log" ]; then
    MXMACA_TRAIN_CHECK_BUDGET=$((tlimit - 10)) timeout -k 10 "$tlimit" bash tests/gpu/run_train_checks.sh $quick 2>&1 | tee "$OUT/train_check.txt"
  else
    MXMACA_TRAIN_CHECK_BUDGET=$((tlimit - 10)) timeout -k 10 "$tlimit" bash tests/gpu/run_train_checks.sh $quick 2>&1
  fi
  trc=${PIPESTATUS[0]}
  echo "train checks exit status: $trc"
  [ "$rc" = 0 ] && rc=$trc
else
  echo "(no tests/gpu/bin/mxmaca_bundle.tar.xz: mxmaca train --device cuda not checked)"
fi
exit "$rc"
