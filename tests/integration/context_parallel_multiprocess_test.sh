#!/bin/bash
# tests/integration/context_parallel_multiprocess_test.sh: `mxmaca train
# --context-parallel-size` as one process per rank (`mxmaca launch`; the K/V ring, the CP
# loss all-reduce, activations and the dp-cp gradient reductions over UCX) gives the same
# run as the same job with every rank in one process (--world-size N).
#
# Criterion: bit-identity, as multiprocess_train_test.sh argues: the UCX communicator sums
# in group-rank order like the in-process hub, point-to-point messages carry the same
# bytes, and every rank runs the same kernels on the same data; so the printed losses must
# be the same strings and the checkpoint shards the same bytes. (The in-process CP runs are
# checked against CP 1 by context_parallel_parity_test.)
#
# Cases (packed documents: --reset-position-ids --reset-attention-mask --eod-mask-loss,
# hidden dropout 0.1): CP 2 x TP 2 with sequence parallelism, and CP 2 x DP 2 with the
# distributed optimizer (4 processes each).
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$root/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/cp_mp"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 2
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 1
      --eval-interval 2 --eval-iters 1 --num-threads 1 --save-interval 4
      --attention-dropout 0 --position-embedding-type rope --reset-position-ids
      --reset-attention-mask --eod-mask-loss)

port=$((20000 + RANDOM % 20000))
losses() { grep -E 'lm loss( value)?:' "$1" | sed -E 's/.*lm loss( value)?: ([^ |]*).*/\2/'; }

# check NAME NPROC FLAGS...: in-process vs launched; same losses and shard bytes.
check() {
  local name="$1" n="$2"; shift 2
  "$mxmaca" train "${base[@]}" "$@" --world-size "$n" --save "$name.one" > "$name.one.log" 2>&1 ||
    { echo "FAIL $name: the in-process run failed"; tail -5 "$name.one.log"; exit 1; }
  port=$((port + 1))
  "$mxmaca" launch --nproc-per-node "$n" --master-port "$port" -- \
    train "${base[@]}" "$@" --save "$name.mp" > "$name.mp.log" 2>&1 ||
    { echo "FAIL $name: the $n-process run failed"; tail -8 "$name.mp.log"; exit 1; }
  if ! diff <(losses "$name.one.log") <(losses "$name.mp.log") > /dev/null; then
    echo "FAIL $name: losses differ (in-process | multi-process):"
    diff -y <(losses "$name.one.log") <(losses "$name.mp.log") || true
    exit 1
  fi
  [ "$(losses "$name.one.log" | wc -l)" -ge 4 ] || { echo "FAIL $name: too few losses"; exit 1; }
  local dir shards=0
  dir=$(printf 'iter_%07d' "$(cat "$name.one/latest_checkpointed_iteration.txt")")
  for f in "$name.one/$dir"/shard_*.safetensors; do
    cmp -s "$f" "$name.mp/$dir/$(basename "$f")" ||
      { echo "FAIL $name: $(basename "$f") differs"; exit 1; }
    shards=$((shards + 1))
  done
  [ "$shards" -ge 1 ] || { echo "FAIL $name: no shards"; exit 1; }
  echo "ok   $name: $n processes, $(losses "$name.mp.log" | wc -l) losses, $shards shards identical"
}

check cp2_tp2_sp 4 --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel
check cp2_dp2_distopt 4 --context-parallel-size 2 --use-distributed-optimizer
echo PASS
