#!/usr/bin/env bash
# tests/bench/stage_balancing_bench.sh: how much of an imbalance's cost stage balancing
# recovers, on real kernels (PP 2 on the 2 cores here).
#
# Stage 1 of a 16-layer GPT is made 1.5x slower from iteration 5 (--inject-stage-slowdown;
# a competing process would slow both stages alike on 2 cores). Three runs, same flags:
#   static      8 + 8 layers, no balancing;
#   dynamic     8 + 8 layers, --rebalance-threshold 0.1 (layers move while it runs);
#   best        the best hand-balanced static split for the slowdown, found by trying
#               --decoder-first-pipeline-num-layers 9, 10, 11 (stage 1 then holds 7, 6, 5);
# and prints the mean iteration time over the last 10 iterations of each and
#   recovered share = (T_static - T_dynamic) / (T_static - T_best)   (target >= 0.8).
#   bazel run -c opt //tests/bench:stage_balancing_bench
set -euo pipefail
MXMACA=$(realpath "${MXMACA_BIN:-api/mxmaca}")
ITERS=${ITERS:-40}
run() {  # run EXTRA-FLAGS... -> prints the mean ms/iteration of the last 10 iterations
  "$MXMACA" train --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 \
    --num-layers 16 --hidden-size 128 --num-attention-heads 4 --seq-length 128 \
    --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 16 \
    --train-iters "$ITERS" --lr 1e-4 --log-interval 1 --eval-iters 0 --num-threads 2 \
    --pipeline-model-parallel-size 2 --inject-stage-slowdown 1:1.5:5 "$@" 2>&1 |
    tee /tmp/stage_balancing_bench.log |
    sed -n 's/.*elapsed time per iteration (ms): \([0-9.]*\).*/\1/p' | tail -10 |
    awk '{s += $1; n++} END {printf "%.1f", s / n}'
}
static=$(run)
dynamic=$(run --rebalance-threshold 0.1 --rebalance-window 3)
moves=$(grep -c "rebalance after" /tmp/stage_balancing_bench.log || true)
layout=$(grep "rebalance after" /tmp/stage_balancing_bench.log | tail -1 | sed 's/.*layout now //')
best=""
best_split=""
for first in 9 10 11; do
  t=$(run --decoder-first-pipeline-num-layers "$first")
  if [ -z "$best" ] || awk "BEGIN {exit !($t < $best)}"; then best=$t; best_split=$first; fi
done
echo "stage balancing, PP 2, 16 layers, stage 1 1.5x slower from iteration 5 (mean ms/iteration, last 10 of $ITERS)"
echo "  static 8+8:            $static"
echo "  dynamic (balancing):   $dynamic   ($moves moves; final layout $layout)"
echo "  best static split:     $best   (--decoder-first-pipeline-num-layers $best_split)"
awk "BEGIN {d = $static - $best; if (d <= 0) print \"  recovered share: n/a (no gain to recover)\";
            else printf \"  recovered share: %.2f (target >= 0.8)\n\", ($static - $dynamic) / d}"
