#!/bin/bash
# tests/integration/metrics/metrics_test.sh: what `mxmaca train --tensorboard-dir` and
# `--metrics-jsonl` write, read back by independent code, and `mxmaca plot`'s SVG.
#
#   - the event file is decoded by Debian's python3-protobuf with TensorFlow's Event /
#     Summary fields (tensorboard_event.proto, compiled by protoc at test time), its
#     TFRecord CRCs checked by a CRC-32C written in Python (read_tensorboard.py); its tags
#     are exactly Megatron's for the switches given, its steps the iterations (and the
#     consumed samples for the "vs samples" twins), its values the log lines' numbers;
#   - the JSONL objects carry the log lines' numbers (check_metrics_files.py jsonl);
#   - `mxmaca plot` writes an SVG that python3's xml.etree parses, whose polylines, mapped
#     back through the tick labels, are the JSONL's points (check_metrics_files.py svg).
# Cases: PP2 in one process with every switch on; the TensorBoard interval 2 with the
# learning-rate and loss-scale scalars switched off; a stopped and resumed run (the JSONL
# is appended to, a new event file); with "launched", a 2-process PP2 job
# (mxmaca launch), where only the last rank writes an event file and rank 0 the JSONL.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$root/api/mxmaca"
here="$root/tests/integration/metrics"
py=/usr/bin/python3
command -v protoc > /dev/null || { echo "FAIL: protoc not found (bash tools/setup.sh installs protobuf-compiler)"; exit 1; }
$py -c "import google.protobuf" || { echo "FAIL: python3-protobuf missing (bash tools/setup.sh)"; exit 1; }
work="${TEST_TMPDIR:-$(mktemp -d)}/metrics_test"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 1 --global-batch-size 4 --train-iters 6 --lr 1e-3 --lr-warmup-iters 2
      --log-interval 1 --eval-interval 3 --eval-iters 1 --num-threads 1
      --pipeline-model-parallel-size 2)
all_tags='["learning-rate", "learning-rate vs samples", "batch-size", "batch-size vs samples",
  "lm loss", "lm loss vs samples", "loss-scale", "loss-scale vs samples", "world-size",
  "world-size vs samples", "grad-norm", "grad-norm vs samples", "iteration-time",
  "throughput", "mem-peak-activation-bytes", "lm loss validation",
  "lm loss validation vs samples", "lm loss validation ppl", "lm loss validation ppl vs samples"]'

if [ "${1:-}" = "launched" ]; then
  port=$((20000 + RANDOM % 20000))
  "$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" \
      --tensorboard-dir tb --metrics-jsonl metrics.jsonl --log-timers-to-tensorboard \
      --log-throughput --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard \
      --log-memory-to-tensorboard > run.log 2>&1 ||
    { echo "FAIL: the launched run failed"; tail -20 run.log; exit 1; }
  n=$(ls tb | grep -c '^events\.out\.tfevents\.' || true)
  [ "$n" = 1 ] || { echo "FAIL: $n event files (expected 1, from the last rank)"; ls -la tb; exit 1; }
  echo "{\"tags\": $all_tags, \"tb_interval\": 1, \"world_size\": 2, \"first_iteration\": 1,
        \"same_clock\": false}" > expect.json
  $py "$here/read_tensorboard.py" "$here/tensorboard_event.proto" tb run.log expect.json
  $py "$here/check_metrics_files.py" jsonl run.log metrics.jsonl
  echo "ok   launched: one event file, from the last of 2 ranks"
  port=$((port + 1))
  if "$mxmaca" launch --nproc-per-node 2 --master-port "$port" -- train "${base[@]}" \
      --log-params-norm > pn.log 2>&1; then
    echo "FAIL: --log-params-norm was accepted in a launched job"; exit 1
  fi
  grep -q -- '--log-params-norm runs in one process only' pn.log ||
    { echo "FAIL: no clear --log-params-norm error"; tail -5 pn.log; exit 1; }
  exit 0
fi

# Case 1: every switch.
"$mxmaca" train "${base[@]}" --world-size 2 --tensorboard-dir tb1 --metrics-jsonl m/metrics.jsonl \
    --log-timers-to-tensorboard --log-throughput --log-validation-ppl-to-tensorboard \
    --log-world-size-to-tensorboard --log-memory-to-tensorboard > run1.log 2>&1 ||
  { echo "FAIL: run 1 failed"; tail -20 run1.log; exit 1; }
grep -q '^> setting tensorboard \.\.\.$' run1.log || { echo "FAIL: no '> setting tensorboard ...'"; exit 1; }
echo "{\"tags\": $all_tags, \"tb_interval\": 1, \"world_size\": 2, \"first_iteration\": 1,
  \"text\": {\"tensorboard_dir\": \"tb1\", \"num_layers\": \"4\", \"lr\": \"0.001\",
  \"tokenizer_type\": \"NullTokenizer\", \"load\": \"None\", \"log_throughput\": \"True\"}}" > expect1.json
$py "$here/read_tensorboard.py" "$here/tensorboard_event.proto" tb1 run1.log expect1.json
$py "$here/check_metrics_files.py" jsonl run1.log m/metrics.jsonl
"$mxmaca" plot --metrics m/metrics.jsonl --output plot.svg --title "metrics_test" > plot.log
$py "$here/check_metrics_files.py" svg m/metrics.jsonl plot.svg

# Case 2: --tensorboard-log-interval 2, learning rate and loss scale off; the pre-2024
# --log-batch-size-to-tensorboard is accepted with a notice.
"$mxmaca" train "${base[@]}" --world-size 2 --tensorboard-dir tb2 --tensorboard-log-interval 2 \
    --no-log-loss-scale-to-tensorboard --no-log-learning-rate-to-tensorboard \
    --log-batch-size-to-tensorboard --tensorboard-queue-size 3 > run2.log 2>&1 ||
  { echo "FAIL: run 2 failed"; tail -20 run2.log; exit 1; }
grep -q 'notice: --log-batch-size-to-tensorboard is accepted' run2.log ||
  { echo "FAIL: no notice for --log-batch-size-to-tensorboard"; exit 1; }
echo '{"tags": ["batch-size", "batch-size vs samples", "lm loss", "lm loss vs samples",
  "grad-norm", "grad-norm vs samples", "lm loss validation", "lm loss validation vs samples"],
  "tb_interval": 2, "world_size": 2, "first_iteration": 1}' > expect2.json
$py "$here/read_tensorboard.py" "$here/tensorboard_event.proto" tb2 run2.log expect2.json

# Case 3: a run stopped at iteration 3 (--exit-interval) and resumed with --load: the JSONL
# file continues (iterations 1..6 once each), the resumed run opens a second event file
# (as SummaryWriter does) holding iterations 4..6.
"$mxmaca" train "${base[@]}" --world-size 2 --save ck --save-interval 3 --exit-interval 3 \
    --metrics-jsonl r/metrics.jsonl --tensorboard-dir tbr > run3a.log 2>&1 ||
  { echo "FAIL: run 3a failed"; tail -20 run3a.log; exit 1; }
"$mxmaca" train "${base[@]}" --world-size 2 --save ck --save-interval 3 --load ck \
    --metrics-jsonl r/metrics.jsonl --tensorboard-dir tbr > run3b.log 2>&1 ||
  { echo "FAIL: run 3b failed"; tail -20 run3b.log; exit 1; }
$py - r/metrics.jsonl <<'PY'
import json, sys
its = [o["iteration"] for o in map(json.loads, open(sys.argv[1])) if o["type"] == "train"]
assert its == [1, 2, 3, 4, 5, 6], its
PY
n=$(ls tbr | grep -c '^events\.out\.tfevents\.' || true)
[ "$n" = 2 ] || { echo "FAIL: $n event files after the resume (expected 2)"; ls -la tbr; exit 1; }
mkdir -p tbr_resumed && mv "tbr/$(ls -t tbr | head -1)" tbr_resumed/  # the newer file
echo '{"tags": ["learning-rate", "learning-rate vs samples", "batch-size", "batch-size vs samples",
  "lm loss", "lm loss vs samples", "loss-scale", "loss-scale vs samples", "grad-norm",
  "grad-norm vs samples", "lm loss validation", "lm loss validation vs samples"],
  "tb_interval": 1, "world_size": 2, "first_iteration": 4, "text": {"load": "ck"}}' > expect3.json
$py "$here/read_tensorboard.py" "$here/tensorboard_event.proto" tbr_resumed run3b.log expect3.json
echo "ok   resumed: the JSONL continues, a second event file holds iterations 4..6"

# Case 4: --log-params-norm (TP2 x PP2; and DP2 with the distributed optimizer and the
# overlapped parameter gather): the logged norm is the norm of the checkpointed parameters,
# and TensorBoard's 'params-norm' is the logged one.
"$mxmaca" train "${base[@]}" --tensor-model-parallel-size 2 --world-size 4 --log-params-norm \
    --log-num-zeros-in-grad \
    --save pn1 --save-interval 3 --tensorboard-dir tbp > run4a.log 2>&1 ||
  { echo "FAIL: run 4a failed"; tail -20 run4a.log; exit 1; }
$py "$here/check_params_norm.py" run4a.log pn1
echo '{"tags": ["learning-rate", "learning-rate vs samples", "batch-size", "batch-size vs samples",
  "lm loss", "lm loss vs samples", "loss-scale", "loss-scale vs samples", "grad-norm",
  "grad-norm vs samples", "num-zeros", "num-zeros vs samples", "params-norm",
  "params-norm vs samples", "lm loss validation",
  "lm loss validation vs samples"], "tb_interval": 1, "world_size": 4, "first_iteration": 1}' > expect4.json
$py "$here/read_tensorboard.py" "$here/tensorboard_event.proto" tbp run4a.log expect4.json
"$mxmaca" train "${base[@]:0:${#base[@]}-2}" --world-size 2 \
    --log-params-norm --log-num-zeros-in-grad --use-distributed-optimizer \
    --overlap-param-gather --overlap-grad-reduce \
    --save pn2 --save-interval 3 > run4b.log 2>&1 ||
  { echo "FAIL: run 4b failed"; tail -20 run4b.log; exit 1; }
$py "$here/check_params_norm.py" run4b.log pn2
# --log-num-zeros-in-grad: the word embedding's padded rows (Megatron's V_pad = V rounded up
# to 128 x TP, V = 4096 + the NullTokenizer's eod) never get a gradient; every other element
# of this model almost surely does. So per iteration: (V_pad - V) x hidden zeros, plus at
# most a handful of exact zeros, each logical element counted once (TP, DP, the
# distributed optimizer's shards).
$py - run4a.log 2 run4b.log 1 <<'PY'
import re, sys
for log, tp in zip(sys.argv[1::2], sys.argv[2::2]):
    v = 4096 + 1
    mult = 128 * int(tp)
    padded = (v + mult - 1) // mult * mult
    want = (padded - v) * 32
    zeros = [int(z) for z in re.findall(r" num zeros: (\d+) \|", open(log).read())]
    assert len(zeros) == 6, (log, zeros)
    assert all(want <= z <= want + 64 for z in zeros), (log, want, zeros)
    print("ok   %s: num zeros %s, padded vocab rows give %d" % (log, zeros, want))
PY

# Bad values are errors naming them.
if "$mxmaca" train "${base[@]}" --world-size 2 --tensorboard-dir tb3 --tensorboard-log-interval 0 > bad.log 2>&1; then
  echo "FAIL: --tensorboard-log-interval 0 was accepted"; exit 1
fi
grep -q -- '--tensorboard-log-interval 0: expected >= 1' bad.log || { echo "FAIL: bad message"; cat bad.log; exit 1; }
# A metrics file that cannot be written mid-run (/dev/full) ends the run with the error.
if "$mxmaca" train "${base[@]}" --world-size 2 --metrics-jsonl /dev/full > full.log 2>&1; then
  echo "FAIL: --metrics-jsonl /dev/full did not fail the run"; exit 1
fi
grep -q -- 'error: writing --metrics-jsonl /dev/full: No space left on device' full.log ||
  { echo "FAIL: no clear write error"; tail -3 full.log; exit 1; }
echo "ok   all metrics checks"
