#!/bin/bash
# tests/integration/multiprocess_resume_rules_test.sh: Megatron's non-persistent checkpoints
# (--non-persistent-save-interval, --non-persistent-ckpt-type global) in a job of one
# process per rank (PP2 x DP2, 4 processes over UCX): rank 0 removes the old one, every rank
# writes its shards into the non-persistent directory, rank 0 commits; the resumed job loads
# the newer non-persistent checkpoint, not the persistent one (api/train/resume_rules.h).
#
# Criterion: bit-identity with the uninterrupted job with every rank in one process
# (multiprocess_train_test checks that launched and in-process runs are the same run).
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$root/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/mp_resume_rules"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 1
      --eval-iters 0 --num-threads 1 --save-interval 2 --pipeline-model-parallel-size 2)
np_flags=(--non-persistent-save-interval 1 --non-persistent-ckpt-type global)
port=$((20000 + RANDOM % 20000))

"$mxmaca" train "${base[@]}" --world-size 4 --save ref > ref.log 2>&1 ||
  { echo "FAIL: the in-process reference failed"; tail -5 ref.log; exit 1; }

# Persistent at 2, non-persistent at 1 and 3, exit at 3 without another save (Megatron:
# that iteration saved already).
"$mxmaca" launch --nproc-per-node 4 --master-port "$port" -- train "${base[@]}" \
  "${np_flags[@]}" --save np --exit-interval 3 > np1.log 2>&1 ||
  { echo "FAIL: the first part failed"; tail -8 np1.log; exit 1; }
[ "$(cat np/latest_checkpointed_iteration.txt)" = 2 ] &&
  [ "$(cat np/non_persistent/latest_checkpointed_iteration.txt)" = 3 ] &&
  [ -d np/non_persistent/iter_0000003 ] && [ ! -d np/iter_0000003 ] ||
  { echo "FAIL: expected persistent 2 and non-persistent 3"; ls -R np | head -20; exit 1; }
echo "ok   saved: persistent 2, non-persistent 3 by 4 processes"

port=$((port + 1))
"$mxmaca" launch --nproc-per-node 4 --master-port "$port" -- train "${base[@]}" \
  "${np_flags[@]}" --save np --load np > np2.log 2>&1 ||
  { echo "FAIL: the resumed part failed"; tail -8 np2.log; exit 1; }
grep -q 'successfully loaded checkpoint from np at iteration 3' np2.log ||
  { echo "FAIL: did not resume from the non-persistent iteration 3"; grep -i 'load' np2.log; exit 1; }
n=0
for f in ref/iter_0000004/shard_*.safetensors; do
  cmp -s "$f" "np/iter_0000004/$(basename "$f")" ||
    { echo "FAIL: $(basename "$f") differs from the uninterrupted run"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAIL: only $n shard files compared"; exit 1; }
echo "ok   resumed from the non-persistent checkpoint; $n final shards identical"
echo "PASS"
