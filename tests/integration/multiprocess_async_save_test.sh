#!/bin/bash
# tests/integration/multiprocess_async_save_test.sh: --async-save in a job of one process
# per rank (PP2, 2 processes over UCX under mxmaca launch): every rank writes its shards in
# the background; rank 0 publishes a checkpoint only once every rank reported its write
# done: at the end of the first iteration whose reports say every rank's write has ended
# (as Megatron finalizes at iteration boundaries), at the latest at the next save or the end.
#  - the checkpoints of iterations 2, 4, 6 are byte-identical to the synchronous
#    in-process job's (every shard file);
#  - a background write failing on rank 1 only (MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION
#    with MXMACA_TEST_FAIL_CHECKPOINT_WRITE_RANK) fails the job with rank 1's error naming
#    the path, and rank 0 does not publish that iteration: the tracker stays at 2;
#  - with --save-interval 20 --train-iters 40, iteration 20's checkpoint is published after
#    an iteration in 21..39, not only at the final save (a background write of 1 MB takes
#    milliseconds; 19 iterations of slack), byte-identical to the synchronous job's.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/mp_async_save"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --lr 1e-3 --log-interval 1
      --eval-iters 0 --num-threads 1 --save-interval 2 --pipeline-model-parallel-size 2)
port=$((20000 + RANDOM % 20000))

"$mxmaca" train "${base[@]}" --world-size 2 --save ref > ref.log 2>&1 ||
  { echo "FAIL: the in-process reference failed"; tail -5 ref.log; exit 1; }

"$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" \
  --save async --async-save > async.log 2>&1 ||
  { echo "FAIL: the launched --async-save job failed"; tail -8 async.log; exit 1; }
n=0
for it in 2 4 6; do
  grep -q "successfully saved checkpoint from iteration *$it to async" async.log ||
    { echo "FAIL: no save line for iteration $it"; grep -i save async.log; exit 1; }
  for f in ref/iter_000000$it/shard_*.safetensors; do
    cmp -s "$f" "async/iter_000000$it/$(basename "$f")" ||
      { echo "FAIL: async/iter_000000$it/$(basename "$f") differs from the reference"; exit 1; }
    n=$((n + 1))
  done
done
[ "$n" -ge 6 ] || { echo "FAIL: only $n shard files compared"; exit 1; }
[ "$(cat async/latest_checkpointed_iteration.txt)" = 6 ] || { echo "FAIL: tracker not 6"; exit 1; }
echo "ok   2 processes, --async-save: $n shard files of iterations 2, 4, 6 byte-identical"

port=$((port + 1))
set +e
MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION=4 MXMACA_TEST_FAIL_CHECKPOINT_WRITE_RANK=1 \
  "$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" \
  --save fail --async-save > fail.log 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: a failed background write on rank 1 exited 0"; tail -8 fail.log; exit 1; }
grep -q "saving checkpoint at iteration 4 (in the background on rank 1, --async-save): .*fail/iter_0000004.tmp-[^ ]*: No space left on device" fail.log ||
  { echo "FAIL: the error does not name rank 1, the path and the OS error"; tail -12 fail.log; exit 1; }
[ "$(cat fail/latest_checkpointed_iteration.txt)" = 2 ] && [ ! -e fail/iter_0000004 ] ||
  { echo "FAIL: rank 0 published iteration 4 although rank 1's write failed"; ls fail; exit 1; }
echo "ok   rank 1's background write failed: exit $rc, iteration 4 not published, 2 still the latest"

# ---- published at an iteration boundary, before the next save ----
long=(--train-iters 40 --save-interval 20)
"$mxmaca" train "${base[@]}" "${long[@]}" --world-size 2 --save ref40 > ref40.log 2>&1 ||
  { echo "FAIL: the in-process reference (40 iterations) failed"; tail -5 ref40.log; exit 1; }
port=$((port + 1))
"$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" "${long[@]}" \
  --save async40 --async-save > async40.log 2>&1 ||
  { echo "FAIL: the launched 40-iteration --async-save job failed"; tail -8 async40.log; exit 1; }
after=$(grep -oE 'checkpoint save at iteration 20 \(--async-save\).* reported after iteration [0-9]+' \
  async40.log | grep -oE '[0-9]+$' || true)
[ -n "$after" ] || { echo "FAIL: no reported-after line for iteration 20"; grep -i save async40.log; exit 1; }
[ "$after" -gt 20 ] && [ "$after" -lt 40 ] ||
  { echo "FAIL: iteration 20's checkpoint was published after iteration $after, expected 21..39"; exit 1; }
# Published when reported: the tracker said 20 before iteration $after + 1 ran, so the
# "successfully saved" line comes before that iteration's log line.
line_saved=$(grep -n "successfully saved checkpoint from iteration *20 to async40" async40.log | cut -d: -f1)
line_next=$(grep -nE "iteration +$((after + 1))/" async40.log | cut -d: -f1)
[ -n "$line_saved" ] && [ "$line_saved" -lt "$line_next" ] ||
  { echo "FAIL: the save line of iteration 20 does not precede iteration $((after + 1))'s"; exit 1; }
for f in ref40/iter_0000020/shard_*.safetensors; do
  cmp -s "$f" "async40/iter_0000020/$(basename "$f")" ||
    { echo "FAIL: async40/iter_0000020/$(basename "$f") differs from the reference"; exit 1; }
done
echo "ok   iteration 20's background checkpoint published after iteration $after (before the next save at 40), byte-identical"
echo "PASS"
