#!/bin/bash
# tests/integration/process_lifetime_test.sh: nothing orphaned, nothing left behind (issue 22).
#   1. SIGKILL of `mxmaca launch` (as the OOM killer or `timeout -s KILL` would): every rank
#      is gone within 3 s and no checkpoint is written after that.
#   2. While that job runs, a second job on the same --save is refused, naming the holder
#      (host, pid of the first job's rank 0, start time).
#   3. The killed job's lock (its line still in the file) and a leftover temp dir of its
#      save are reported by `mxmaca inspect-checkpoint`; the next job takes the lock over,
#      names the dead holder and removes the temp dir.
#   4. A rank that never arrives: every 10 s the waiting ranks print which ranks they wait
#      for and the time left before --distributed-timeout-minutes.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$(dirname "$root/api/mxmaca")" && pwd)/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/lifetime"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
port=$((20000 + RANDOM % 20000))
base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --num-threads 1
      --pipeline-model-parallel-size 2)
started=()
cleanup() { for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# rank_pid RANK SAVE: the pid of the `mxmaca train` process of RANK writing SAVE.
rank_pid() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import os, sys
rank, save = sys.argv[1].encode(), sys.argv[2].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
    except OSError:
        continue
    if b"train" in argv and save in argv and b"RANK=" + rank in env:
        print(pid)
PY
}
latest() { cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0; }

# ---- 1 + 2: a launched job, a second job on its --save, then SIGKILL of the launcher ----
port=$((port + 1))
"$mxmaca" launch --nproc-per-node 2 --master-port $port -- train "${base[@]}" \
  --train-iters 100000 --log-interval 5 --save "$work/ckpt" --save-interval 2 > job1.log 2>&1 &
launcher=$!
started+=($launcher)
for _ in $(seq 1 600); do [ "$(latest ckpt)" -ge 4 ] && break; sleep 0.1; done
[ "$(latest ckpt)" -ge 4 ] || { tail -5 job1.log; fail "job 1 wrote no checkpoint"; }
r0=$(rank_pid 0 "$work/ckpt"); r1=$(rank_pid 1 "$work/ckpt")
[ -n "$r0" ] && [ -n "$r1" ] || fail "ranks of job 1 not found"
started+=($r0 $r1)

set +e
"$mxmaca" train "${base[@]}" --world-size 2 --train-iters 4 --save "$work/ckpt" \
  --save-interval 2 > job2.log 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "a second job on a locked --save ran (exit 0)"
grep -qE "is in use by another job \(host [^,]+, pid $r0, started [0-9-]+ [0-9:]+ UTC" job2.log ||
  { cat job2.log; fail "the refusal does not name job 1's rank 0 (pid $r0)"; }
echo "ok   a second job on the same --save is refused: $(grep -o 'in use by another job ([^;]*' job2.log)"
# The same for a multi-process second job (started as srun would): rank 0 checks the lock,
# and every rank fails with its message.
port=$((port + 1))
p2=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$mxmaca" train "${base[@]}" --train-iters 4 --save "$work/ckpt" --save-interval 2 \
    > job2b.r$r.log 2>&1 &
  p2+=($!)
  started+=($!)
done
for r in 0 1; do
  set +e; wait "${p2[$r]}"; rc=$?; set -e
  [ "$rc" != 0 ] || fail "rank $r of a second multi-process job on a locked --save exited 0"
  grep -qE "error: (rank 0: )?--save directory $work/ckpt is in use by another job \(host [^,]+, pid $r0," \
    job2b.r$r.log || { cat job2b.r$r.log; fail "rank $r of the second job does not name the holder"; }
done
grep -q "error: rank 0: --save directory" job2b.r1.log || fail "rank 1 does not relay rank 0's refusal"
echo "ok   a second 2-process job is refused on both ranks, rank 1 relaying rank 0's verdict"

kill -9 "$launcher"
t0=$(date +%s%N)
gone=0
for _ in $(seq 1 50); do
  if ! kill -0 "$r0" 2>/dev/null && ! kill -0 "$r1" 2>/dev/null; then gone=1; break; fi
  sleep 0.1
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$gone" = 1 ] || fail "ranks still running 5 s after SIGKILL of mxmaca launch"
[ "$ms" -le 3000 ] || fail "ranks took ${ms} ms to die after SIGKILL of mxmaca launch"
snapshot() { (cd ckpt && ls -1 && cat latest_checkpointed_iteration.txt); }
before=$(snapshot)
sleep 2
[ "$(snapshot)" = "$before" ] || fail "the save directory changed after the launcher was killed"
echo "ok   SIGKILL of mxmaca launch: both ranks gone within ${ms} ms, nothing written after"

# ---- 3: the dead job's lock and a killed save's temp dir ----
host=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host"])' \
  ckpt/mxmaca-save.lock)
hex=$(printf '%x' "$(date +%s%N)")
leftover="iter_0000777.tmp-$r0-0-$hex-$host"
mkdir "ckpt/$leftover"
touch "ckpt/$leftover/shard_pp0.safetensors.partial"
"$mxmaca" inspect-checkpoint --load "$work/ckpt" > inspect1.txt
grep -q "save lock mxmaca-save.lock: free; last held by a job that is gone (host $host, pid $r0," \
  inspect1.txt || { cat inspect1.txt; fail "inspect-checkpoint does not report the dead job's lock"; }
grep -q "  $leftover (a save of iteration 777 by pid $r0 on $host, begun .*, writer gone): the next save removes it" \
  inspect1.txt || { cat inspect1.txt; fail "inspect-checkpoint does not list the leftover temp dir"; }
grep -qE "<- latest" inspect1.txt || fail "inspect-checkpoint does not mark the latest iteration"
last=$(latest ckpt)
"$mxmaca" train "${base[@]}" --world-size 2 --train-iters $((last + 2)) --save "$work/ckpt" \
  --load "$work/ckpt" --save-interval 2 --override-opt_param-scheduler > job3.log 2>&1 || { tail -5 job3.log; fail "job 3 failed"; }
grep -q "took over the --save lock of $work/ckpt from a job that is gone (host $host, pid $r0," job3.log ||
  { head -20 job3.log; fail "job 3 does not say it took over job 1's lock"; }
grep -q "removed a stale checkpoint temp entry: $work/ckpt/$leftover" job3.log ||
  fail "job 3 does not name the temp dir it removed"
[ -z "$(ls ckpt | grep -F .tmp-)" ] || { ls ckpt; fail "temp entries left after job 3's saves"; }
[ "$(latest ckpt)" = $((last + 2)) ] || fail "job 3 did not save iteration $((last + 2))"
"$mxmaca" inspect-checkpoint --save "$work/ckpt" > inspect2.txt
grep -q "save lock mxmaca-save.lock: free$" inspect2.txt || { cat inspect2.txt; fail "lock not released"; }
grep -q "temp entries (saves that did not commit): 0" inspect2.txt || fail "inspect still lists temp entries"
echo "ok   the next job took over the dead job's lock and removed its leftover temp dir"

# ---- 4: a rank that never arrives ----
port=$((port + 1))
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$mxmaca" train "${base[@]}" --pipeline-model-parallel-size 3 --num-layers 3 \
    --global-batch-size 6 --train-iters 2 --distributed-timeout-minutes 1 > wait.r$r.log 2>&1 &
  pids+=($!)
  started+=($!)
done
for _ in $(seq 1 150); do
  grep -q "waiting for ranks" wait.r0.log 2>/dev/null && grep -q "waiting for ranks" wait.r1.log 2>/dev/null && break
  sleep 0.1
done
for r in 0 1; do
  grep -qE "mxmaca train: rank $r: rendezvous at 127.0.0.1:$port: waiting for ranks \[2\] of 3 \(2 arrived, counting rank 0\); [0-9]+s left before the timeout of 1m \(--distributed-timeout-minutes\)" \
    wait.r$r.log || { cat wait.r$r.log; fail "rank $r printed no progress line naming rank 2 within 15 s"; }
done
kill -9 "${pids[@]}" 2>/dev/null || true
echo "ok   waiting for a missing rank: $(grep -m1 -o 'waiting for ranks.*' wait.r1.log)"
echo "PASS"
