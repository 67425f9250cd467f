#!/bin/bash
# tests/integration/async_save_test.sh: Megatron's --async-save in one process (two
# in-process pipeline stages, so two shard files per checkpoint written concurrently):
#  (a) checkpoints written with --async-save are byte-identical to synchronous ones (every
#      shard file of iterations 2, 4, 6; metadata.json's state and tensor index), and a
#      run resumed from the async iteration 4 ends in the synchronous run's iteration 6,
#      byte for byte;
#  (b) a background write that fails (MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION, an
#      ENOSPC on the temp dir) makes the run exit non-zero with a message naming the
#      path, and the tracker still names the previous checkpoint, which loads;
#  (c) a process SIGKILLed while an async save is being written (its shard files are on
#      disk, slowed by MXMACA_TEST_SLOW_CHECKPOINT_WRITE_MS) leaves the previous
#      checkpoint the latest; a resumed run loads it and ends in the synchronous run's
#      final checkpoint, byte for byte.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/async_save"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
py=/usr/bin/python3

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --lr 1e-3 --log-interval 1
      --eval-iters 0 --num-threads 1 --save-interval 2 --pipeline-model-parallel-size 2
      --world-size 2)

# same_checkpoint A B: every shard file of A equals B's; metadata.json's state and tensors
# (args differ: they hold the command line) are equal.
same_checkpoint() {
  local n=0 f
  for f in "$1"/shard_*.safetensors; do
    cmp -s "$f" "$2/$(basename "$f")" ||
      { echo "FAIL: $2/$(basename "$f") differs from $f"; exit 1; }
    n=$((n + 1))
  done
  [ "$n" -ge 2 ] || { echo "FAIL: only $n shard files in $1"; exit 1; }
  [ "$(ls "$2"/shard_*.safetensors | wc -l)" = "$n" ] ||
    { echo "FAIL: $2 has other shard files than $1"; ls "$1" "$2"; exit 1; }
  "$py" - "$1/metadata.json" "$2/metadata.json" <<'PY' || exit 1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("iteration", "state", "tensors"):
    if a[k] != b[k]:
        sys.exit(f"FAIL: metadata.json {k} differs: {sys.argv[1]} vs {sys.argv[2]}")
PY
}

# (a) byte-identical to synchronous saves, and a bit-identical resume.
"$mxmaca" train "${base[@]}" --save sync > sync.log 2>&1 ||
  { echo "FAIL: the synchronous run failed"; tail -5 sync.log; exit 1; }
"$mxmaca" train "${base[@]}" --save async --async-save > async.log 2>&1 ||
  { echo "FAIL: the --async-save run failed"; tail -5 async.log; exit 1; }
grep -q 'checkpoint save at iteration 2 (synchronous): training blocked' sync.log ||
  { echo "FAIL: no synchronous save timing line"; grep -i save sync.log; exit 1; }
for it in 2 4 6; do
  grep -q "saving checkpoint at iteration *$it in the background (--async-save)" async.log &&
    grep -q "successfully saved checkpoint from iteration *$it to async" async.log &&
    grep -q "checkpoint save at iteration $it (--async-save): training blocked .* s, background write .* s" async.log ||
    { echo "FAIL: the async save lines of iteration $it are missing"; grep -i save async.log; exit 1; }
  same_checkpoint "sync/iter_000000$it" "async/iter_000000$it"
done
[ "$(cat async/latest_checkpointed_iteration.txt)" = 6 ] ||
  { echo "FAIL: async tracker is $(cat async/latest_checkpointed_iteration.txt), expected 6"; exit 1; }
[ -z "$(ls -d async/*.tmp-* 2>/dev/null)" ] || { echo "FAIL: temp entries left"; ls async; exit 1; }
echo "ok   (a) iterations 2, 4, 6: async checkpoints byte-identical to synchronous ones"

"$mxmaca" train "${base[@]}" --load async --ckpt-step 4 --save resumed --async-save \
  > resumed.log 2>&1 || { echo "FAIL: resume from the async checkpoint failed"; tail -5 resumed.log; exit 1; }
grep -q 'successfully loaded checkpoint from async at iteration 4' resumed.log ||
  { echo "FAIL: did not resume at iteration 4"; grep -i load resumed.log; exit 1; }
same_checkpoint sync/iter_0000006 resumed/iter_0000006
echo "ok   (a) resumed from async iteration 4: iteration 6 byte-identical to the uninterrupted run"

# (b) a failing background write: non-zero exit naming the path; previous checkpoint kept.
set +e
MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION=4 \
  "$mxmaca" train "${base[@]}" --save fail --async-save > fail.log 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: a failed background write exited 0"; tail -5 fail.log; exit 1; }
grep -q "saving checkpoint at iteration 4 (in the background, --async-save): .* fail/iter_0000004.tmp-[^ ]*: No space left on device" fail.log ||
  { echo "FAIL: the error does not name the path and the OS error"; tail -8 fail.log; exit 1; }
grep -q "the background checkpoint save (--async-save) of iteration 4 to fail/iter_0000004 failed" fail.log ||
  { echo "FAIL: the failure was not logged when it happened"; tail -8 fail.log; exit 1; }
[ "$(cat fail/latest_checkpointed_iteration.txt)" = 2 ] && [ ! -e fail/iter_0000004 ] ||
  { echo "FAIL: expected the tracker at 2 and no iter_0000004"; ls fail; exit 1; }
"$mxmaca" inspect-checkpoint --load fail --verify > inspect.log 2>&1 ||
  { echo "FAIL: the previous checkpoint does not verify"; cat inspect.log; exit 1; }
same_checkpoint sync/iter_0000002 fail/iter_0000002
echo "ok   (b) failed background write: exit $rc naming the path; iteration 2 still the latest and verified"

# (c) SIGKILL during an async save: the previous checkpoint stays the latest and loads.
MXMACA_TEST_SLOW_CHECKPOINT_WRITE_MS=1500 \
  "$mxmaca" train "${base[@]}" --save kill --async-save > kill.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do  # up to 60 s: the iteration-4 save's shards are written, unpublished
  if [ "$(ls kill/iter_0000004.tmp-*/shard_*.safetensors 2>/dev/null | wc -l)" -ge 2 ]; then break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null ||
  { echo "FAIL: the run ended before the kill"; tail -5 kill.log; exit 1; }
[ "$(ls kill/iter_0000004.tmp-*/shard_*.safetensors 2>/dev/null | wc -l)" -ge 2 ] ||
  { echo "FAIL: the iteration-4 save never wrote its shards"; ls -R kill; exit 1; }
kill -KILL "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" = 137 ] || { echo "FAIL: expected the run killed (137), got $rc"; exit 1; }
[ "$(cat kill/latest_checkpointed_iteration.txt)" = 2 ] && [ ! -e kill/iter_0000004 ] ||
  { echo "FAIL: after the kill the tracker is not 2 or iter_0000004 exists"; ls kill; exit 1; }
"$mxmaca" train "${base[@]}" --load kill --save kill > kill_resumed.log 2>&1 ||
  { echo "FAIL: resume after the kill failed"; tail -5 kill_resumed.log; exit 1; }
grep -q 'successfully loaded checkpoint from kill at iteration 2' kill_resumed.log ||
  { echo "FAIL: did not resume at iteration 2"; grep -i load kill_resumed.log; exit 1; }
same_checkpoint sync/iter_0000006 kill/iter_0000006
[ -z "$(ls -d kill/*.tmp-* 2>/dev/null)" ] || { echo "FAIL: the killed save's temp dir was left"; ls kill; exit 1; }
echo "ok   (c) SIGKILL mid-save: iteration 2 loaded; the resumed run's iteration 6 byte-identical"
echo "PASS"
