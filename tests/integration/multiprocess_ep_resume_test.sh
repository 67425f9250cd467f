#!/bin/bash
# tests/integration/multiprocess_ep_resume_test.sh: an expert-parallel job of one process
# per rank (EP 2 under mxmaca launch, so the world size comes from the launcher's
# environment, not the command line) saves at iteration 2, stops, and resumes: the resumed
# iterations 3-4 print the straight 4-iteration job's losses and grad norms, and the final
# checkpoints are byte-identical. (Before api/train/checkpoint_args.cc read the stored MoE
# model layout-free, the resume failed with "checkpoint args: MoE flags:
# --expert-model-parallel-size 2 ...".)
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/mp_ep_resume"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4095 --mock-data --num-layers 2
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1
      --eval-iters 0 --num-threads 1 --num-experts 4 --moe-router-topk 2
      --expert-model-parallel-size 2 --save-interval 2)
launch() {  # launch LOG ARGS...: a 2-process job on a fresh port
  local log=$1; shift
  local port=$((20000 + RANDOM % 20000))
  "$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" "$@" \
    > "$log" 2>&1 || { echo "FAIL: $log"; tail -8 "$log"; exit 1; }
}
metrics() { grep -oE 'iteration +[0-9]+/|lm loss: [0-9.E+-]+|grad norm: [0-9.]+' "$1" | paste -sd' '; }

launch straight.log --save straight
launch first.log --save resumed --exit-interval 2
grep -q "iteration        2/" first.log || { echo "FAIL: the first half did not reach iteration 2"; exit 1; }
launch second.log --save resumed --load resumed
grep -q "successfully loaded checkpoint from resumed at iteration 2" second.log ||
  { echo "FAIL: the resume did not load iteration 2"; tail -5 second.log; exit 1; }
want=$(grep -E 'iteration +[34]/' straight.log | grep -oE 'lm loss: [0-9.E+-]+|grad norm: [0-9.]+' | paste -sd' ')
got=$(grep -E 'iteration +[34]/' second.log | grep -oE 'lm loss: [0-9.E+-]+|grad norm: [0-9.]+' | paste -sd' ')
[ -n "$want" ] && [ "$want" = "$got" ] ||
  { echo "FAIL: resumed iterations 3-4 differ: straight [$want] resumed [$got]"; exit 1; }
n=0
for f in straight/iter_0000004/shard_*.safetensors; do
  cmp -s "$f" "resumed/iter_0000004/$(basename "$f")" ||
    { echo "FAIL: $(basename "$f") differs after the resume"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 1 ] || { echo "FAIL: no checkpoint shards"; exit 1; }
echo "ok   EP 2 over 2 processes: resumed iterations 3-4 equal the straight run, $n shards identical"
echo PASS
