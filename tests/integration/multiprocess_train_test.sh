#!/bin/bash
# tests/integration/multiprocess_train_test.sh: `mxmaca train` as one process per rank
# (launched by `mxmaca launch`, activations and collectives over UCX) gives the same run as
# the same job with every rank in one process (--world-size N).
#
# Criterion: bit-identity. The UCX communicator's default all-reduce / reduce-scatter sum
# in group-rank order, exactly as the in-process hub (transport/ucx/ucx_communicator.h), the
# coordinators sum the same per-rank reports in the same order (actors/control_plane.h), and
# every rank runs the same kernels on the same data; so the printed losses must be the same
# strings and the checkpoint shards (parameters and Adam moments, fp32) the same bytes.
# (The in-process runs are themselves checked against the single-device run by
# pipeline_parity_test and tensor_parallel_parity_test.)
#
# Cases: TP2 x SP x PP2 x DP2 (8 processes, 1F1B); PP2 interleaved (2 chunks) x DP2 with
# the distributed optimizer and overlapped grad reduce / param gather (4 processes);
# ZB-H1 with the dynamic policy x DP2 (4 processes); ZB-V (2 processes); a MoE model with
# expert parallelism EP2 (the EP group on the TP group, tokens by the all-to-all dispatcher) at
# TP2 x SP x PP2 x DP2 (8 processes; its routing statistics travel in the report blocks) and
# with EP2 across the two DP replicas of PP2 x DP2 (4 processes: tokens cross replicas); a
# multi-process run stopped at iteration 2 (--exit-interval, saves) and resumed with --load,
# which must end in the same checkpoint as the uninterrupted run.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$root/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/mp_train"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 1
      --eval-interval 2 --eval-iters 1 --num-threads 1 --save-interval 2)

port=$((20000 + RANDOM % 20000))
losses() { grep -E 'lm loss( value)?:' "$1" | sed -E 's/.*lm loss( value)?: ([^ |]*).*/\2/'; }

# check NAME NPROC FLAGS...: in-process vs launched.
check() {
  local name="$1" n="$2"; shift 2
  local t0=$(date +%s)
  "$mxmaca" train "${base[@]}" "$@" --world-size "$n" --save "$name.one" > "$name.one.log" 2>&1 ||
    { echo "FAIL $name: the in-process run failed"; tail -5 "$name.one.log"; exit 1; }
  port=$((port + 1))
  "$mxmaca" launch --nproc-per-node "$n" --master-port "$port" -- \
    train "${base[@]}" "$@" --save "$name.mp" > "$name.mp.log" 2>&1 ||
    { echo "FAIL $name: the $n-process run failed"; tail -8 "$name.mp.log"; exit 1; }
  compare "$name" "$name.one" "$name.mp"
  echo "ok   $name: $n processes, $(losses "$name.mp.log" | wc -l) losses, $(grep -c 'moe layer' "$name.mp.log" || true) MoE lines and every shard identical ($(( $(date +%s) - t0 )) s)"
}

# compare NAME LOG_DIR_A LOG_DIR_B: same losses (train and validation), same shard bytes.
compare() {
  local name="$1" a="$2" b="$3"
  if ! diff <(losses "$a.log") <(losses "$b.log") > /dev/null; then
    echo "FAIL $name: losses differ (in-process | multi-process):"
    diff -y <(losses "$a.log") <(losses "$b.log") || true
    exit 1
  fi
  [ "$(losses "$a.log" | wc -l)" -ge 4 ] || { echo "FAIL $name: too few losses logged"; exit 1; }
  # MoE: the per-layer routing lines (tokens per expert, load, dropped, aux and z-loss).
  if ! diff <(grep 'moe layer' "$a.log") <(grep 'moe layer' "$b.log") > /dev/null; then
    echo "FAIL $name: MoE routing statistics differ"; exit 1
  fi
  local it
  it=$(cat "$a/latest_checkpointed_iteration.txt")
  [ "$it" = "$(cat "$b/latest_checkpointed_iteration.txt")" ] ||
    { echo "FAIL $name: latest checkpoints differ"; exit 1; }
  local dir=$(printf 'iter_%07d' "$it") shards=0
  for f in "$a/$dir"/shard_*.safetensors; do
    cmp -s "$f" "$b/$dir/$(basename "$f")" ||
      { echo "FAIL $name: $(basename "$f") differs"; exit 1; }
    shards=$((shards + 1))
  done
  [ "$shards" -ge 1 ] || { echo "FAIL $name: no shards"; exit 1; }
  [ "$(ls "$b/$dir"/shard_*.safetensors | wc -l)" = "$shards" ] ||
    { echo "FAIL $name: the multi-process checkpoint has other shards"; exit 1; }
}

check tp2_sp_pp2_dp2 8 --tensor-model-parallel-size 2 --sequence-parallel \
  --pipeline-model-parallel-size 2
check interleaved_distopt 4 --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer \
  --overlap-grad-reduce --overlap-param-gather
check zbh1_dynamic 4 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 \
  --dynamic-pipeline
check zbv 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-v \
  --num-virtual-stages-per-pipeline-rank 2
check moe_ep2_tp2_sp_pp2_dp2 8 --tensor-model-parallel-size 2 --sequence-parallel \
  --pipeline-model-parallel-size 2 --num-experts 4 --moe-router-topk 2 --moe-layer-freq 2 \
  --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 \
  --expert-model-parallel-size 2 --expert-tensor-parallel-size 1 --moe-token-dispatcher-type alltoall
check moe_ep2_across_dp 4 --pipeline-model-parallel-size 2 --num-experts 4 --moe-router-topk 2 \
  --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 1e-2 --expert-model-parallel-size 2 \
  --moe-token-dispatcher-type alltoall

# Resume: stop at iteration 2 (saves), resume from it; the end is the uninterrupted run's.
layout=(--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2)
port=$((port + 1))
"$mxmaca" launch --nproc-per-node 8 --master-port "$port" -- train "${base[@]}" "${layout[@]}" \
  --save resume.mp --exit-interval 2 > resume1.log 2>&1 ||
  { echo "FAIL resume: the first part failed"; tail -8 resume1.log; exit 1; }
grep -q 'exiting program at iteration 2' resume1.log || { echo "FAIL resume: no exit at 2"; exit 1; }
port=$((port + 1))
"$mxmaca" launch --nproc-per-node 8 --master-port "$port" -- train "${base[@]}" "${layout[@]}" \
  --save resume.mp --load resume.mp > resume2.log 2>&1 ||
  { echo "FAIL resume: the resumed part failed"; tail -8 resume2.log; exit 1; }
grep -q 'successfully loaded checkpoint' resume2.log || { echo "FAIL resume: nothing loaded"; exit 1; }
cat resume1.log resume2.log > resume.mp.log
# The uninterrupted run logs iterations 1-4 and validations at 2 and 4; the stopped run
# skips the validation at its exit (as Megatron's exit path does): compare train losses.
diff <(grep -E 'iteration +[0-9]+/' tp2_sp_pp2_dp2.one.log | sed -E 's/.*lm loss: ([^ |]*).*/\1/') \
     <(grep -E 'iteration +[0-9]+/' resume.mp.log | sed -E 's/.*lm loss: ([^ |]*).*/\1/') ||
  { echo "FAIL resume: the resumed loss curve differs"; exit 1; }
it=$(cat resume.mp/latest_checkpointed_iteration.txt)
[ "$it" = 4 ] || { echo "FAIL resume: latest checkpoint $it, expected 4"; exit 1; }
for f in tp2_sp_pp2_dp2.one/iter_0000004/shard_*.safetensors; do
  cmp -s "$f" "resume.mp/iter_0000004/$(basename "$f")" ||
    { echo "FAIL resume: $(basename "$f") differs from the uninterrupted run"; exit 1; }
done
echo "ok   resume: stopped at 2 and resumed as 8 processes; loss curve and final shards identical"
echo "PASS"
