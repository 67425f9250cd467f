#!/usr/bin/env bash
# tests/gpu/run_train_checks.sh: `mxmaca train --device cuda` end to end on a GPU machine
# (issue 8), against `--device cpu` on the same machine, same weights (a function of seed
# and name) and same mock data:
#   1. fp32, 20 iterations: every logged loss within 1e-4 relative of the CPU backend's;
#   2. --bf16, 20 iterations: within 2e-2 (bf16 GEMM inputs round differently on cuBLASLt
#      and oneDNN only in the fp32 accumulation order, but the error grows with steps);
#   2b. TP2 with sequence parallelism (two ranks sharing the GPU, their collectives through
#      host memory), fp32: within 1e-4 of the CPU backend's TP2 run;
#   3. a 2-stage pipeline (two stage actors on one GPU, each on its own CUDA stream), CUDA
#      graphs on (the default) vs --no-cuda-graph: identical logged losses, and the
#      iteration times each way;
#   4. an end-to-end throughput line of a larger GPT with the training state on the device
#      (docs/CUDA.md "Training state on the device") and with --optimizer-cpu-offload (host
#      master weights and AdamW), and their step-time ratio.
# Needs tests/gpu/bin/mxmaca_bundle.tar.xz (bash tests/gpu/build_train_bundle.sh here).
# Each mxmaca run has its own timeout (90 s; the throughput run gets what is left of
# MXMACA_TRAIN_CHECK_BUDGET, default 230 s) and its log is appended to $OUT/train_runs.log
# when it ends.
# Usage: bash tests/gpu/run_train_checks.sh [--quick]; exit 0 pass, 1 fail, 2 no bundle/GPU.
# MXMACA_TRAIN_CHECK_DEVICE=device-on-cpu runs the same script with the GPU backend's code
# path on the CPU kernels (a dry run of the script itself on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
bundle=tests/gpu/bin/mxmaca_bundle.tar.xz
[ -f "$bundle" ] || { echo "SKIP: $bundle missing (bash tests/gpu/build_train_bundle.sh)"; exit 2; }
dir="${TMPDIR:-/tmp}/mxmaca_train_check"
rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$bundle"
mx="$dir/mxmaca_bundle/mxmaca"
CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
export LD_LIBRARY_PATH="$dir/mxmaca_bundle/lib:$CUDA_PATH/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for py in python3 /usr/bin/python3; do  # PyTorch's pip CUDA libraries, as run_gpu_checks.sh
  d=$("$py" -c 'import nvidia, os, glob; print(":".join(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib"))))' 2>/dev/null) &&
    [ -n "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d" && break
done
missing=$(ldd "$mx" | grep "not found" || true)
[ -z "$missing" ] || { echo "FAIL: unresolved libraries:"; echo "$missing"; exit 1; }
cd "$dir"
dev="${MXMACA_TRAIN_CHECK_DEVICE:-cuda}"
if [ "$dev" = cuda ]; then
  probe=$(timeout -k 5 60 "$mx" train --tokenizer-type NullTokenizer --vocab-size 64 --mock-data --num-layers 1 \
          --hidden-size 8 --num-attention-heads 1 --seq-length 8 --max-position-embeddings 8 \
          --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3 --device cuda 2>&1)
  if echo "$probe" | grep -- "--device cuda: no GPU" > /dev/null; then
    echo "SKIP: $(echo "$probe" | grep -m1 'error:')"; exit 2
  fi
fi
iters=20
[ "$quick" = 1 ] && iters=8
base=(--tokenizer-type NullTokenizer --vocab-size 8192 --mock-data --num-layers 4
      --hidden-size 256 --num-attention-heads 8 --seq-length 256 --max-position-embeddings 256
      --micro-batch-size 4 --global-batch-size 16 --train-iters "$iters" --lr 3e-4 --min-lr 3e-5
      --lr-warmup-iters 2 --log-interval 1 --hidden-dropout 0.0 --attention-dropout 0.0
      --num-threads "$(nproc)" --eval-iters 0)
losses() { grep -E ' lm loss: ' "$1" | sed -E 's/.* lm loss: ([^ |]*).*/\1/'; }
ms() { grep -E 'elapsed time per iteration' "$1" | tail -n +3 |
       sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/' | awk '{s+=$1; n++} END {if (n) printf "%.1f", s/n}'; }
fail=0
# Each run has its own timeout (a hang in one must leave time for the others) and its log
# is appended to $OUT/train_runs.log as soon as it ends (the outer timeout may stop this
# script; one file, since the device tool returns at most 8 files from $OUT).
limit=90  # s per run on the GPU machine (the CPU runs of this size take seconds there)
[ "$dev" = cuda ] || limit=900  # the dry run on a small shared machine
keep() {
  [ -n "${OUT:-}" ] && { echo "===== $1 ====="; cat "$1"; } >> "$OUT/train_runs.log" 2>/dev/null
  return 0
}
run() {  # run NAME FLAGS...
  local name="$1" rc=0; shift
  timeout -k 5 "$limit" "$mx" train "${base[@]}" "$@" > "$name.log" 2>&1 || rc=$?
  keep "$name.log"
  if [ "$rc" != 0 ]; then
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "FAIL $name: mxmaca train timed out after $limit s:"
    else
      echo "FAIL $name: mxmaca train failed (exit $rc):"
    fi
    tail -5 "$name.log"; fail=1; return 1
  fi
}
compare() {  # compare NAME A B TOL
  local name="$1" a="$2" b="$3" tol="$4" worst
  worst=$(paste <(losses "$a.log") <(losses "$b.log") |
          awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>w) w=d; n++} END {if (n < 2) print "none"; else printf "%.3g", w}')
  if [ "$worst" = "none" ]; then echo "FAIL $name: no losses"; fail=1; return; fi
  if awk -v w="$worst" -v t="$tol" 'BEGIN {exit !(w <= t)}'; then
    echo "PASS $name: $(losses "$a.log" | wc -l) losses, worst relative difference $worst (<= $tol)"
  else
    echo "FAIL $name: worst relative difference $worst > $tol"; paste <(losses "$a.log") <(losses "$b.log"); fail=1
  fi
}
echo "== mxmaca train --device $dev vs --device cpu =="
run cpu32 --device cpu && run cuda32 --device "$dev" && compare "fp32 loss ($iters iterations)" cpu32 cuda32 1e-4
grep -m1 'CUDA graphs' cuda32.log || true
run cpu16 --device cpu --bf16 && run cuda16 --device "$dev" --bf16 && compare "bf16 loss ($iters iterations)" cpu16 cuda16 2e-2
echo "== TP2 with sequence parallelism (two ranks on one GPU, collectives through the host) =="
tp=(--tensor-model-parallel-size 2 --sequence-parallel --world-size 2)
run cpu_tp --device cpu "${tp[@]}" && run cuda_tp --device "$dev" "${tp[@]}" &&
  compare "TP2+SP fp32 loss ($iters iterations)" cpu_tp cuda_tp 1e-4
echo "== 2-stage pipeline on one GPU: graphs on vs off =="
if run pp_graphs --device "$dev" --pipeline-model-parallel-size 2 --global-batch-size 32 &&
   run pp_eager --device "$dev" --pipeline-model-parallel-size 2 --global-batch-size 32 --no-cuda-graph; then
  if diff <(losses pp_graphs.log) <(losses pp_eager.log) > /dev/null; then
    echo "PASS pipeline: graphs on and off give identical losses ($(losses pp_graphs.log | wc -l) iterations);" \
         "mean iteration ms after 2: graphs $(ms pp_graphs.log), eager $(ms pp_eager.log)"
  else
    echo "FAIL pipeline: losses differ with graphs on vs off"; paste <(losses pp_graphs.log) <(losses pp_eager.log); fail=1
  fi
fi
echo "== end to end throughput: training state on the device vs --optimizer-cpu-offload =="
big_iters=6
[ "$quick" = 1 ] && big_iters=3
big=(--tokenizer-type NullTokenizer --vocab-size 50257 --mock-data --num-layers 8 --hidden-size 2048
     --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4
     --global-batch-size 16 --train-iters "$big_iters" --lr 1e-4 --log-interval 1 --bf16
     --hidden-dropout 0.0 --attention-dropout 0.0 --num-threads "$(nproc)" --eval-iters 0)
# last_ms LOG: the last iteration's elapsed time per iteration (ms).
last_ms() { grep -oE 'elapsed time per iteration \(ms\): [0-9.]+' "$1" | tail -1 | grep -oE '[0-9.]+$'; }
if [ "$dev" != cuda ]; then
  echo "  (skipped: not on a GPU)"
else
  for mode in device offload; do
    extra=()
    [ "$mode" = offload ] && extra=(--optimizer-cpu-offload --use-precision-aware-optimizer)
    # The device run gets half of what is left, the offload run the rest.
    left=$(( ${MXMACA_TRAIN_CHECK_BUDGET:-230} - SECONDS ))
    big_limit=$left
    [ "$mode" = device ] && big_limit=$(( left / 2 ))
    if [ "$big_limit" -lt 30 ]; then
      echo "FAIL throughput run ($mode): not started, only $big_limit s of the budget left"; fail=1
    elif timeout -k 5 "$big_limit" "$mx" train "${big[@]}" "${extra[@]}" --device cuda > "big_$mode.log" 2>&1; then
      keep "big_$mode.log"
      echo "  $mode: $(grep -m1 'training state' "big_$mode.log" | sed -E 's/^ *> *//')"
      grep -E 'iteration +[0-9]+/' "big_$mode.log" | tail -1 | sed -E 's/^ *\[[^]]*\] */  /'
    else
      rc=$?
      keep "big_$mode.log"
      echo "FAIL throughput run $mode (exit $rc$([ "$rc" = 124 ] && echo ": timed out after $big_limit s")):"
      tail -5 "big_$mode.log"; fail=1
    fi
  done
  if [ -s big_device.log ] && [ -s big_offload.log ]; then
    d=$(last_ms big_device.log) o=$(last_ms big_offload.log)
    [ -n "$d" ] && [ -n "$o" ] &&
      echo "  step time, last iteration: state on the device $d ms, --optimizer-cpu-offload $o ms (ratio offload/device $(awk -v a="$o" -v b="$d" 'BEGIN{printf "%.2f", a/b}'))"
  fi
fi
[ "$fail" = 0 ] && echo "train checks: PASS" || echo "train checks: FAIL"
exit "$fail"
