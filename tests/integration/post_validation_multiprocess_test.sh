#!/bin/bash
# tests/integration/post_validation_multiprocess_test.sh: --optimizer-post-validation in a
# multi-process job (`mxmaca launch`, one rank per process, reports all-gathered over the
# control plane) gives the bits of the synchronous step: the printed losses are the same
# strings and the checkpoint shards (parameters and Adam moments) the same bytes as the
# in-process run WITHOUT the flag (itself checked against one device by
# pipeline_parity_test).
#
# Each rank's optimistic step is decided from its own report while the reports are
# gathered. --clip-grad is set below every grad norm of a probe run (0.8 x the smallest), so
# every step clips: a rank whose own norm is under the threshold steps optimistically with
# coefficient 1 and must roll back and redo the clipped step; the counts are printed by
# every process at the end and the test requires at least one rollback per case (with two
# pipeline stages, sum n_s^2 = G^2, so some stage's norm is at most 0.71 G < 0.8 G).
#
# Cases: PP2 1F1B (2 processes), PP2 ZB-V (2), PP2 x DP2 ZB-H1 (4), PP2 x DP2 with the
# distributed optimizer (4; those ranks take no optimistic step — their step all-gathers
# parameters — and must still give the same bits); and PP2 1F1B with --clip-grad 10 (no
# step clips: optimistic steps are confirmed).
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$root/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/mp_postval"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --lr 1e-3 --log-interval 1
      --eval-interval 3 --eval-iters 1 --num-threads 1 --save-interval 3)

port=$((20000 + RANDOM % 20000))
losses() { grep -E 'lm loss( value)?:' "$1" | sed -E 's/.*lm loss( value)?: ([^ |]*).*/\2/'; }
norms() { grep -E 'iteration +[0-9]+/' "$1" | sed -E 's/.*grad norm: ([^ |]*).*/\1/'; }

# check NAME NPROC FLAGS...: probe, in-process without the flag, launched with it.
check() {
  local name="$1" n="$2"; shift 2
  "$mxmaca" train "${base[@]}" "$@" --world-size "$n" --save "$name.probe" \
    > "$name.probe.log" 2>&1 || { echo "FAIL $name: the probe failed"; tail -5 "$name.probe.log"; exit 1; }
  local clip
  clip=$(norms "$name.probe.log" | sort -g | head -1 | awk '{ printf "%.6g", 0.8 * $1 }')
  if [ -n "${clip_override:-}" ]; then clip="$clip_override"; fi
  "$mxmaca" train "${base[@]}" "$@" --clip-grad "$clip" --world-size "$n" --save "$name.one" \
    > "$name.one.log" 2>&1 || { echo "FAIL $name: the in-process run failed"; tail -5 "$name.one.log"; exit 1; }
  port=$((port + 1))
  "$mxmaca" launch --nproc-per-node "$n" --master-port "$port" -- \
    train "${base[@]}" "$@" --clip-grad "$clip" --optimizer-post-validation --save "$name.mp" \
    > "$name.mp.log" 2>&1 ||
    { echo "FAIL $name: the $n-process run failed"; tail -8 "$name.mp.log"; exit 1; }
  if ! diff <(losses "$name.one.log") <(losses "$name.mp.log") > /dev/null; then
    echo "FAIL $name: losses differ (in-process sync | multi-process post-validation):"
    diff -y <(losses "$name.one.log") <(losses "$name.mp.log") || true
    exit 1
  fi
  [ "$(losses "$name.one.log" | wc -l)" -ge 6 ] || { echo "FAIL $name: too few losses"; exit 1; }
  local it dir shards=0
  it=$(cat "$name.one/latest_checkpointed_iteration.txt")
  [ "$it" = "$(cat "$name.mp/latest_checkpointed_iteration.txt")" ] ||
    { echo "FAIL $name: latest checkpoints differ"; exit 1; }
  dir=$(printf 'iter_%07d' "$it")
  for f in "$name.one/$dir"/shard_*.safetensors; do
    cmp -s "$f" "$name.mp/$dir/$(basename "$f")" ||
      { echo "FAIL $name: $(basename "$f") differs"; exit 1; }
    shards=$((shards + 1))
  done
  [ "$shards" -ge 1 ] || { echo "FAIL $name: no shards"; exit 1; }
  local confirmed rolled
  confirmed=$(grep -o 'post-validation: [0-9]* optimistic steps confirmed' "$name.mp.log" |
              awk '{ s += $2 } END { print s + 0 }')
  rolled=$(grep -o 'confirmed, [0-9]* rolled back' "$name.mp.log" | awk '{ s += $2 } END { print s + 0 }')
  [ "$(grep -c 'optimizer post-validation:' "$name.mp.log")" -ge 1 ] ||
    { echo "FAIL $name: no post-validation summary line"; exit 1; }
  if [ "${expect_rollback:-1}" = 1 ] && [ "$rolled" -lt 1 ]; then
    echo "FAIL $name: no optimistic step was rolled back (clip $clip; confirmed $confirmed)"; exit 1
  fi
  if [ "${expect_confirmed:-0}" = 1 ] && [ "$confirmed" -lt 1 ]; then
    echo "FAIL $name: no optimistic step was confirmed (clip $clip)"; exit 1
  fi
  echo "ok   $name: $n processes, clip $clip, $shards shards identical, optimistic steps" \
       "confirmed $confirmed, rolled back $rolled"
}

check pp2_1f1b 2 --pipeline-model-parallel-size 2
# No clipping (every grad norm of the probe is under 10): optimistic steps are confirmed.
clip_override=10 expect_rollback=0 expect_confirmed=1 check pp2_1f1b_noclip 2 \
  --pipeline-model-parallel-size 2
check pp2_zbv 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v \
  --num-virtual-stages-per-pipeline-rank 2
check pp2_dp2_zbh1 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1
expect_rollback=0 check pp2_dp2_distopt 4 --pipeline-model-parallel-size 2 \
  --use-distributed-optimizer
echo "PASS"
