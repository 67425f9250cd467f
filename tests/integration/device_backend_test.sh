#!/usr/bin/env bash
# tests/integration/device_backend_test.sh: the GPU backend's code path (--device
# device-on-cpu: layers::GptStage built on the emulated device, its slots and segments,
# host master weights) gives the CPU backend's run bit for bit — every logged loss, grad norm
# and validation loss, and every checkpoint shard byte — across the layouts the device
# backends accept: one device, PP x DP with 1F1B, interleaved virtual stages with the
# distributed optimizer, zero-bubble ZB-H1 with tied embeddings and RoPE/SwiGLU, bf16,
# Llama-3 RoPE scaling with interleaved pairs, q/k layernorms and zero-centred norms,
# selective and full recomputation, tensor parallelism (with and without sequence
# parallelism, its collectives through host memory), the dynamic pipeline (W out of forward
# order) under an injected slowdown, a memory cap that holds, a forced layer move,
# optimistic steps (--optimizer-post-validation) with an overlapped parameter gather,
# training state on the device (untied PP2 with clipping, TP2+SP, PP4 with the tied
# embedding's sum across stages, ZB-V mixed with a host rank, DP4 and PP2 x DP2 with the
# bucket reduction on host copies) and its host<->device traffic against --optimizer-cpu-offload, a resume (the
# state downloaded into the checkpoint and uploaded after the load), and 4 UCX processes
# (PP2 x DP2, and TP2 x PP2). --device cuda without a GPU fails
# with the no-GPU message, and what the device backends do not run yet is refused by name. (With gradient accumulation
# fusion the weight GEMMs would round differently, so this test runs with
# --no-gradient-accumulation-fusion: the fused numerics are checked in
# layers/device/device_stage_test within their fp32 bound.)
set -euo pipefail
root="${TEST_SRCDIR:-}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/device_backend"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 4
      --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --lr 1e-3 --log-interval 1
      --eval-interval 2 --eval-iters 1 --num-threads 1 --save-interval 2
      --no-gradient-accumulation-fusion)

# metrics LOG: loss, grad norm and validation lines without timings.
metrics() {
  grep -E 'lm loss' "$1" | sed -E 's/\[[^]]*\]//; s/elapsed time[^|]*\|//; s/throughput[^|]*\|//;
    s/tokens\/s[^|]*\|//; s/model GFLOP[^|]*\|//; s/MFU[^|]*\|//; s/peak activation[^|]*\|//;
    s/bubble per stage[^|]*\|//'
}

# same NAME DIR_A DIR_B: identical metrics and checkpoint shards.
same() {
  local name="$1" a="$2" b="$3"
  if ! diff <(metrics "$a.log") <(metrics "$b.log") > /dev/null; then
    echo "FAIL $name: the logs differ (cpu | device-on-cpu):"
    diff -y <(metrics "$a.log") <(metrics "$b.log") || true
    exit 1
  fi
  [ "$(metrics "$a.log" | wc -l)" -ge 4 ] || { echo "FAIL $name: too few losses logged"; exit 1; }
  local it dir n=0
  it=$(cat "$a/latest_checkpointed_iteration.txt")
  dir=$(printf 'iter_%07d' "$it")
  for f in "$a/$dir"/shard_*.safetensors; do
    cmp -s "$f" "$b/$dir/$(basename "$f")" || { echo "FAIL $name: $(basename "$f") differs"; exit 1; }
    n=$((n + 1))
  done
  [ "$n" -ge 1 ] || { echo "FAIL $name: no checkpoint shards"; exit 1; }
  echo "ok   $name: $(metrics "$a.log" | wc -l) log lines and $n checkpoint shards identical"
}

# check NAME FLAGS...: in-process, --device cpu vs --device device-on-cpu.
check() {
  local name="$1"; shift
  "$mxmaca" train "${base[@]}" "$@" --device cpu --save "$name.cpu" > "$name.cpu.log" 2>&1 ||
    { echo "FAIL $name: the cpu run failed"; tail -5 "$name.cpu.log"; exit 1; }
  "$mxmaca" train "${base[@]}" "$@" --device device-on-cpu --save "$name.dev" > "$name.dev.log" 2>&1 ||
    { echo "FAIL $name: the device-on-cpu run failed"; tail -5 "$name.dev.log"; exit 1; }
  same "$name" "$name.cpu" "$name.dev"
}

check single
check pp2_dp2 --pipeline-model-parallel-size 2 --world-size 4
check interleaved_distopt --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 \
  --world-size 4 --use-distributed-optimizer --overlap-grad-reduce
check zbh1_rope_swiglu --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 \
  --position-embedding-type rope --swiglu --normalization RMSNorm --disable-bias-linear \
  --hidden-dropout 0.0 --attention-dropout 0.0 --world-size 2
check bf16 --bf16 --pipeline-model-parallel-size 2 --world-size 2
check model_flags --pipeline-model-parallel-size 2 --world-size 2 --position-embedding-type rope \
  --use-rope-scaling --rotary-interleaved --qk-layernorm --apply-layernorm-1p
check selective_recompute --recompute-granularity selective --pipeline-model-parallel-size 2 \
  --world-size 2
check full_recompute --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 1 --pipeline-model-parallel-size 2 --world-size 2
check tp2_sp_pp2 --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 \
  --world-size 4
check tp2_dp2_rope_swiglu --tensor-model-parallel-size 2 --world-size 4 --position-embedding-type rope \
  --swiglu --normalization RMSNorm --qk-layernorm --use-distributed-optimizer --overlap-grad-reduce
check zbh1_dynamic --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --dynamic-pipeline \
  --inject-stage-slowdown 1:3:2 --world-size 2
check memory_cap --pipeline-model-parallel-size 2 --world-size 2 --memory-cap-per-shard 64M
check layer_move --pipeline-model-parallel-size 2 --world-size 2 --force-layer-move 2:1:0
check post_validation --pipeline-model-parallel-size 2 --world-size 4 --optimizer-post-validation \
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
# Training state on the device (parameters, gradients, AdamW moments stay there; the step
# runs there): every rank of these has no host-side gradient reduction but the tied
# embedding's sum across stages (a host copy of that gradient). ZB-V puts both ends of the
# tied embedding on rank 0's two chunks, summed on the host arenas: rank 0 steps on the
# host, rank 1 on the device.
check state_untied_pp2 --pipeline-model-parallel-size 2 --world-size 2 \
  --untie-embeddings-and-output-weights --clip-grad 0.05
check state_tp2 --tensor-model-parallel-size 2 --sequence-parallel --world-size 2
check state_pp4_tied --pipeline-model-parallel-size 4 --world-size 4
check state_zbv_mixed --pipeline-model-parallel-size 2 --pipeline-schedule zb-v \
  --num-virtual-stages-per-pipeline-rank 2 --world-size 2
# Data parallel: the bucket all-reduce on host copies of the gradients (pp2_dp2 above also
# sums the tied embedding across stages first).
check state_dp4_overlap --world-size 4 --overlap-grad-reduce --untie-embeddings-and-output-weights \
  --clip-grad 0.05
for want in "single|1 of 1 rank" "state_untied_pp2|2 of 2 ranks" "state_tp2|2 of 2 ranks" \
            "state_pp4_tied|4 of 4 ranks" "zbh1_rope_swiglu|2 of 2 ranks" \
            "state_zbv_mixed|1 of 2 ranks; the others step AdamW on the host: their gradients" \
            "pp2_dp2|4 of 4 ranks" "state_dp4_overlap|4 of 4 ranks" \
            "interleaved_distopt|0 of 4 ranks; the others step AdamW on the host: their gradients"; do
  grep -q "training state (parameters, gradients, AdamW moments) on the device for ${want##*|}" \
    "${want%%|*}.dev.log" ||
    { echo "FAIL state: ${want%%|*} does not say '${want##*|}'"; grep 'training state' "${want%%|*}.dev.log"; exit 1; }
done
# Traffic: from the emulated device's counters, the copies of iterations 5-8 (a run of 8
# minus one of 4, no saves, no evaluation): with the state on the device only the batch and
# a few scalars per iteration; with --optimizer-cpu-offload the weights up and the
# gradients down (~2 x the parameter bytes).
copies() {  # copies LOG: host->device + device->host bytes of rank 0
  grep -oE 'host<->device copies of rank 0 .*' "$1" |
    sed -E 's/.*host->device [0-9.]+ MB \(([0-9]+) bytes\).*device->host [0-9.]+ MB \(([0-9]+) bytes\).*/\1 \2/' |
    awk '{print $1 + $2}'
}
params_bytes=$(( $(grep -oE 'the [0-9.]+ MB of parameters' single.dev.log | grep -oE '[0-9.]+' | head -1 |
  awk '{printf "%d", $1 * 1048576}') ))
for mode in device offload; do
  extra=()
  [ "$mode" = offload ] && extra=(--optimizer-cpu-offload --use-precision-aware-optimizer)
  for iters in 4 8; do
    "$mxmaca" train "${base[@]}" --device device-on-cpu --train-iters $iters --eval-iters 0 \
      --save-interval 1000 "${extra[@]}" > "traffic.$mode.$iters.log" 2>&1 ||
      { echo "FAIL traffic $mode: the run failed"; tail -5 "traffic.$mode.$iters.log"; exit 1; }
  done
  per_iter=$(( ($(copies traffic.$mode.8.log) - $(copies traffic.$mode.4.log)) / 4 ))
  eval "traffic_$mode=$per_iter"
done
diff <(metrics traffic.device.8.log) <(metrics traffic.offload.8.log) > /dev/null ||
  { echo "FAIL traffic: --optimizer-cpu-offload changed the losses"; exit 1; }
[ "$traffic_device" -lt $((params_bytes / 20)) ] ||
  { echo "FAIL traffic: $traffic_device bytes per iteration with the state on the device (parameters: $params_bytes)"; exit 1; }
[ "$traffic_offload" -ge $((2 * params_bytes * 9 / 10)) ] ||
  { echo "FAIL traffic: only $traffic_offload bytes per iteration with --optimizer-cpu-offload"; exit 1; }
echo "ok   traffic per iteration (iterations 5-8): $traffic_device bytes with the state on the device, $traffic_offload with --optimizer-cpu-offload (parameters: $params_bytes bytes); the same losses"

# Resume: 4 iterations, saved at 2, resumed to 4 on the device path = the straight run.
"$mxmaca" train "${base[@]}" --device device-on-cpu --exit-interval 2 --save resume.dev \
  > resume.a.log 2>&1 || { echo "FAIL resume: first half"; tail -5 resume.a.log; exit 1; }
"$mxmaca" train "${base[@]}" --device device-on-cpu --load resume.dev --save resume.dev \
  > resume.b.log 2>&1 || { echo "FAIL resume: second half"; tail -5 resume.b.log; exit 1; }
diff <(metrics single.dev.log | grep -v 'iteration        [12]/' | grep -v 'at iteration 2') \
     <(metrics resume.b.log | grep -v 'at iteration 2') > /dev/null ||
  { echo "FAIL resume: the resumed iterations differ"; diff <(metrics single.dev.log) <(metrics resume.b.log); exit 1; }
echo "ok   resume: iterations 3-4 after a restart equal the straight run"

# 4 UCX processes (PP2 x DP2), device-on-cpu: the in-process cpu run.
port=$((20000 + RANDOM % 20000))
"$mxmaca" launch --nproc-per-node 4 --master-port "$port" -- train "${base[@]}" \
  --pipeline-model-parallel-size 2 --device device-on-cpu --save mp.dev > mp.dev.log 2>&1 ||
  { echo "FAIL multi-process: the run failed"; tail -8 mp.dev.log; exit 1; }
same multiprocess_pp2_dp2 pp2_dp2.cpu mp.dev
# 4 UCX processes with TP2 x PP2 (sequence parallel; the TP collectives go device -> host
# -> UCX -> host -> device): the in-process cpu run.
port=$((20000 + RANDOM % 20000))
"$mxmaca" launch --nproc-per-node 4 --master-port "$port" -- train "${base[@]}" \
  --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 \
  --device device-on-cpu --save mp_tp.dev > mp_tp.dev.log 2>&1 ||
  { echo "FAIL multi-process TP: the run failed"; tail -8 mp_tp.dev.log; exit 1; }
same multiprocess_tp2_sp_pp2 tp2_sp_pp2.cpu mp_tp.dev

# Errors: cuda without a GPU (or without CUDA in the build), and refusals by name.
if "$mxmaca" train "${base[@]}" --device cuda > cuda.log 2>&1; then
  echo "FAIL cuda: trained without a GPU?"; exit 1
fi
grep -Eq -- "--device cuda: (no GPU|MXMACA was built without CUDA)" cuda.log ||
  { echo "FAIL cuda: unexpected message"; cat cuda.log; exit 1; }
for flags in "--context-parallel-size 2 --world-size 2|--context-parallel-size 2" \
             "--num-experts 4|--num-experts"; do
  f="${flags%%|*}" want="${flags##*|}"
  if "$mxmaca" train "${base[@]}" $f --device device-on-cpu > refuse.log 2>&1; then
    echo "FAIL refuse $f: accepted"; exit 1
  fi
  grep -q -- "$want needs --device cpu" refuse.log ||
    { echo "FAIL refuse $f: unexpected message"; cat refuse.log; exit 1; }
done
# A cap below two slots: the first Forward that needs a second slot fails, naming the cap.
if "$mxmaca" train "${base[@]}" --pipeline-model-parallel-size 2 --world-size 2 \
    --memory-cap-per-shard 1K --device device-on-cpu > cap.log 2>&1; then
  echo "FAIL memory cap: a 1K cap trained"; exit 1
fi
grep -q -- "out of memory: shard rank .* for the slot of micro-batch .*--memory-cap-per-shard" cap.log ||
  { echo "FAIL memory cap: unexpected message"; cat cap.log; exit 1; }
echo "ok   errors: no GPU, CP / MoE refused by name, a memory cap below one slot"
echo PASS
