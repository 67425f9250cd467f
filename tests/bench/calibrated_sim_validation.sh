#!/usr/bin/env bash
# tests/bench/calibrated_sim_validation.sh: `mxmaca simulate --cost-table` against real CPU
# runs of `mxmaca train` on this machine (issue 11: "within 10% of measured step time").
#
# For each layout (PP 1-2, DP 1-2, TP 1-2, in-process, mock data, NullTokenizer):
# 1. `mxmaca calibrate` measures the model's ops (the layout's TP size; 1 and 2 concurrent
#    copies) right before the run, so table and run see similar load from other processes;
# 2. `mxmaca train` runs ITERS iterations; of the "elapsed time per iteration (ms)" of
#    iterations SKIP+1..ITERS (the first ones warm up allocators and caches) it takes the
#    fastest ("best": other processes only slow a step down, so the fastest step estimates
#    the unloaded one, as calibrate's fastest repeat does for the ops) and the mean;
# 3. `mxmaca simulate` with the same flags and --cost-table predicts it; the errors are
#    simulated / measured - 1 against the best and against the mean step.
# The 2 cores are shared with other work (engineers compiling): before each layout the
# script waits (up to WAIT_S seconds, default 1800) until the machine is nearly idle — other
# processes using under MAX_BUSY of the cores (default 0.25) over a 3-second sample — and
# prints that busy share and the 1-minute load average.
#   bazel run //tests/bench:calibrated_sim_validation [-- ITERS SKIP]
set -euo pipefail
ITERS=${1:-12}
SKIP=${2:-3}
MAX_BUSY=${MAX_BUSY:-0.25}
WAIT_S=${WAIT_S:-1800}
MXMACA=$(realpath "${MXMACA_BIN:-api/mxmaca}")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

MODEL=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256
       --max-position-embeddings 256 --micro-batch-size 2 --tokenizer-type NullTokenizer
       --vocab-size 4095)
TRAIN=(--global-batch-size 16 --train-iters "$ITERS" --lr 1e-4 --mock-data --eval-iters 0
       --log-interval 1 --data-cache-path "$WORK/cache")

# busy: the share of all cores busy over 3 s (/proc/stat), e.g. 0.50 = one of 2 cores.
busy() {
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 3
  read -r -a b < <(grep '^cpu ' /proc/stat)
  awk -v u0="${a[1]}" -v n0="${a[2]}" -v s0="${a[3]}" -v i0="${a[4]}" -v w0="${a[5]}" \
      -v q0="${a[6]}" -v r0="${a[7]}" -v t0="${a[8]}" \
      -v u1="${b[1]}" -v n1="${b[2]}" -v s1="${b[3]}" -v i1="${b[4]}" -v w1="${b[5]}" \
      -v q1="${b[6]}" -v r1="${b[7]}" -v t1="${b[8]}" 'BEGIN {
        busy = (u1 + n1 + s1 + q1 + r1 + t1) - (u0 + n0 + s0 + q0 + r0 + t0);
        idle = (i1 + w1) - (i0 + w0);
        printf "%.2f", busy / (busy + idle) }'
}
# wait_idle: waits until busy < MAX_BUSY or WAIT_S passed; prints the last busy share.
wait_idle() {
  local start=$SECONDS b
  while :; do
    b=$(busy)
    if awk -v b="$b" -v m="$MAX_BUSY" 'BEGIN {exit !(b < m)}' || (( SECONDS - start > WAIT_S )); then
      echo "$b"; return
    fi
    sleep 7
  done
}

echo "model: 4 layers, hidden 256, 4 heads, seq 256, micro-batch 2, global batch 16, vocab 4096 (padded), fp32"

# name | world size | --num-threads | layout flags
CONFIGS=(
  "PP1 DP1 TP1|1|1|"
  "PP2 (1 thread)|2|1|--pipeline-model-parallel-size 2"
  "PP2|2|2|--pipeline-model-parallel-size 2"
  "DP2|2|2|"
  "TP2|2|2|--tensor-model-parallel-size 2"
  "TP2 SP|2|2|--tensor-model-parallel-size 2 --sequence-parallel"
  "PP2 DP2|4|2|--pipeline-model-parallel-size 2"
  "TP2 PP2|4|2|--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"
  "TP2 DP2|4|2|--tensor-model-parallel-size 2"
)
printf "\n%-16s %5s %7s %9s %9s %10s %8s %8s %6s %6s\n" layout world threads "best ms" "mean ms" \
  "sim ms" "err best" "err mean" busy load
for cfg in "${CONFIGS[@]}"; do
  IFS='|' read -r name world threads layout <<< "$cfg"
  # shellcheck disable=SC2206
  flags=(${layout})
  idle_busy=$(wait_idle)
  tp=1
  [[ "$layout" == *tensor-model-parallel-size* ]] && tp=2
  # Ops run --num-threads OpenMP threads each in mxmaca train (the GptStage's config), so
  # the table is measured with as many.
  "$MXMACA" calibrate "${MODEL[@]}" --output "$WORK/table.json" --calibrate-tp "$tp" \
    --calibrate-concurrency 1,2 --calibrate-repeats 5 --calibrate-threads-per-op "$threads" > "$WORK/calibrate.log" 2>&1 ||
    { cat "$WORK/calibrate.log"; exit 1; }
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$MXMACA" train "${MODEL[@]}" "${TRAIN[@]}" --world-size "$world" --num-threads "$threads" \
    "${flags[@]}" > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; exit 1; }
  read -r best mean < <(grep -o 'iteration *[0-9]*/.*elapsed time per iteration (ms): [0-9.]*' "$WORK/train.log" |
    awk -v skip="$SKIP" '{split($2, it, "/"); if (it[1] + 0 > skip) {s += $NF; n++; if (!b || $NF < b) b = $NF}}
      END {printf "%.1f %.1f\n", b, s / n}')
  "$MXMACA" simulate "${MODEL[@]}" "${TRAIN[@]}" --world-size "$world" --num-threads "$threads" \
    "${flags[@]}" --cost-table "$WORK/table.json" > "$WORK/sim.log" 2>&1 || { cat "$WORK/sim.log"; exit 1; }
  simulated=$(awk '/^step time/ {printf "%.1f", $3 * 1000}' "$WORK/sim.log")
  error=$(awk -v m="$best" -v s="$simulated" 'BEGIN {printf "%+.1f%%", 100 * (s / m - 1)}')
  error_mean=$(awk -v m="$mean" -v s="$simulated" 'BEGIN {printf "%+.1f%%", 100 * (s / m - 1)}')
  printf "%-16s %5s %7s %9s %9s %10s %8s %8s %6s %6s\n" "$name" "$world" "$threads" "$best" "$mean" \
    "$simulated" "$error" "$error_mean" "$idle_busy" "$load"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
