#!/usr/bin/env bash
# tests/bench/stage_ab_bench.sh: training speed of this build's `mxmaca` against another
# build of it (an older commit: "old"), on the KJV job's model (6 layers, hidden 256, 8
# heads, seq 256, micro-batch 8, GPT-2 vocab padded to 50304; mock data so no corpus is
# needed), alternating old / new runs in one invocation so that machine drift hits both.
# Prints each run's tokens/s, the median ratio new/old with its spread (min and max of the
# per-pair ratios), and each build's model GFLOP/s against the GEMM peak `mxmaca` measures at
# start-up in the same run.
#
#   git worktree add /tmp/mxmaca_old <commit> && (cd /tmp/mxmaca_old && bazel build //api:mxmaca)
#   OLD_MXMACA=/tmp/mxmaca_old/bazel-bin/api/mxmaca bazel run //tests/bench:stage_ab_bench -- [RUNS] [ITERS]
#
# RUNS (default 5) runs of each build, ITERS (default 12) iterations each; the first two
# iterations of every run are warm-up and not in its mean (mxmaca's own "mean ... tokens/s").
set -euo pipefail
RUNS=${1:-5}
ITERS=${2:-12}
NEW=$(realpath "${MXMACA_BIN:-api/mxmaca}")
OLD=${OLD_MXMACA:?set OLD_MXMACA to the mxmaca binary of the build to compare with}
OLD=$(realpath "$OLD")
THREADS=${THREADS:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
[ "$RUNS" -ge 1 ] || { echo "RUNS must be >= 1, got $RUNS" >&2; exit 2; }

run() {  # run BINARY LABEL: prints "tokens/s peak_gflops model_gflops"
  local bin=$1 label=$2
  "$bin" train --num-layers 6 --hidden-size 256 --num-attention-heads 8 \
    --seq-length 256 --max-position-embeddings 256 --micro-batch-size 8 --global-batch-size 8 \
    --train-iters "$ITERS" --lr 1e-4 --hidden-dropout 0 --attention-dropout 0 \
    --mock-data --tokenizer-type NullTokenizer --vocab-size 50256 \
    --data-cache-path "$WORK/cache" --eval-iters 0 --log-interval "$ITERS" \
    --num-threads "$THREADS" > "$WORK/$label.log" 2>&1 || { cat "$WORK/$label.log" >&2; exit 1; }
  local tps peak gflops
  tps=$(grep -o 'mean [0-9.]* tokens/s' "$WORK/$label.log" | awk '{print $2}')
  peak=$(grep -o 'measured GEMM peak: [0-9.]*' "$WORK/$label.log" | awk '{print $4}')
  gflops=$(grep -o 'model GFLOP/s: [0-9.]*' "$WORK/$label.log" | tail -1 | awk '{print $3}')
  [ -n "$tps" ] || { echo "no tokens/s in the $label log:" >&2; tail -5 "$WORK/$label.log" >&2; exit 1; }
  echo "$tps ${peak:-0} ${gflops:-0}"
}

echo "config: 6 layers, hidden 256, 8 heads, seq 256, micro-batch 8, vocab 50257 (padded 50304)," \
  "$THREADS threads, $ITERS iterations, $RUNS runs each, alternating old/new"
echo "old: $OLD"
echo "new: $NEW"
results="$WORK/results"
: > "$results"
for i in $(seq 1 "$RUNS"); do
  # Alternate which build goes first, so neither always runs on a warmer machine.
  if [ $((i % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    read -r tps peak gflops < <(run "$bin" "$which$i")
    echo "run $i $which: $tps tokens/s (model $gflops GFLOP/s, GEMM peak $peak GFLOP/s)"
    echo "$i $which $tps $peak $gflops" >> "$results"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for i, which, tps, peak, gflops in rows:
    by.setdefault(int(i), {})[which] = (float(tps), float(peak), float(gflops))
ratios = [by[i]["new"][0] / by[i]["old"][0] for i in sorted(by)]
for which in ("old", "new"):
    tps = [by[i][which][0] for i in by]
    eff = [by[i][which][2] / by[i][which][1] for i in by if by[i][which][1] > 0]
    print("%s: median %.1f tokens/s (min %.1f, max %.1f); model FLOP/s / GEMM peak: median %.1f%%"
          % (which, statistics.median(tps), min(tps), max(tps),
             100 * statistics.median(eff) if eff else float("nan")))
print("new/old tokens/s: median %.4f, spread [%.4f, %.4f] over %d pairs"
      % (statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
PY
