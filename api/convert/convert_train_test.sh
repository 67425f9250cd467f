#!/bin/bash
# api/convert/convert_train_test.sh: `mxmaca convert` on checkpoints that `mxmaca train`
# wrote. For a Llama-style run (RMSNorm, SwiGLU, RoPE, GQA, untied, no biases), a
# GPT-2-style run (LayerNorm, learned positions, biases, tied) and a Mixtral-style MoE run
# (the Llama one with 4 experts, top-2, aux loss, on every layer): train 3 iterations, export
# (--to hf), import back (--from hf), then `train --load ... --finetune` from the original
# and from the imported checkpoint must print the same losses and grad norms (every
# parameter equal: the runs are deterministic), and the imported checkpoint's model
# tensors hold the original's bytes (CRC-32C per tensor from inspect-checkpoint); for MoE
# the load-balancing loss is compared too. Also: a sharded bf16 export, refused
# --model-types, --help.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/convert_train"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

common=(--tokenizer-type NullTokenizer --vocab-size 4095 --mock-data --seq-length 32
        --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
        --log-interval 1 --eval-iters 0 --num-threads 1)
llama=(--num-layers 2 --hidden-size 48 --num-attention-heads 6 --group-query-attention
       --num-query-groups 2 --ffn-hidden-size 80 --normalization RMSNorm --swiglu
       --position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights)
gpt2=(--num-layers 2 --hidden-size 32 --num-attention-heads 4)
# (--ffn-hidden-size = --moe-ffn-hidden-size: with every layer MoE the dense size is unused
# and config.json cannot state it; the import records intermediate_size as both.)
mixtral=(--num-layers 2 --hidden-size 48 --num-attention-heads 6 --group-query-attention
         --num-query-groups 2 --ffn-hidden-size 40 --normalization RMSNorm --swiglu
         --position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights
         --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 40 --moe-aux-loss-coeff 1e-2)

# losses LOG: the loss (and with MoE load_balancing_loss, z_loss) and grad norm of every
# iteration line.
losses() { grep -o 'lm loss: .*| grad norm: [^|]*' "$1"; }
# model_crcs DIR: "name shape crc" of every model/ tensor (inspect-checkpoint's listing).
model_crcs() { "$mxmaca" inspect-checkpoint "$1" | grep -o 'model/[^ ]* .*' | sort; }

check() {  # check NAME EXPECTED_TYPE FLAGS...
  local name=$1 type=$2
  shift 2
  "$mxmaca" train "${common[@]}" "$@" --train-iters 3 --save "$name" --save-interval 3 \
    > "$name.train.log" 2>&1 || { echo "FAIL: training $name"; tail -5 "$name.train.log"; exit 1; }
  "$mxmaca" convert --to hf --load "$name" --save "$name.hf" > "$name.export.log" 2>&1 ||
    { echo "FAIL: export of $name"; cat "$name.export.log"; exit 1; }
  grep -q "\"model_type\": \"$type\"" "$name.hf/config.json" ||
    { echo "FAIL: $name.hf/config.json is not $type"; cat "$name.hf/config.json"; exit 1; }
  "$mxmaca" convert --from hf --load "$name.hf" --save "$name.back" > "$name.import.log" 2>&1 ||
    { echo "FAIL: import of $name.hf"; cat "$name.import.log"; exit 1; }
  [ -n "$(model_crcs "$name.back")" ] || { echo "FAIL: no model tensors listed in $name.back"; exit 1; }
  diff <(model_crcs "$name") <(model_crcs "$name.back") ||
    { echo "FAIL: $name.back's model tensors differ from $name's"; exit 1; }
  "$mxmaca" train "${common[@]}" "$@" --train-iters 2 --load "$name" --finetune > "$name.a.log" 2>&1 ||
    { echo "FAIL: finetune from $name"; tail -5 "$name.a.log"; exit 1; }
  "$mxmaca" train "${common[@]}" "$@" --train-iters 2 --load "$name.back" --finetune > "$name.b.log" 2>&1 ||
    { echo "FAIL: finetune from the imported $name.back"; tail -5 "$name.b.log"; exit 1; }
  [ "$(losses "$name.a.log" | wc -l)" = 2 ] || { echo "FAIL: no loss lines"; cat "$name.a.log"; exit 1; }
  diff <(losses "$name.a.log") <(losses "$name.b.log") ||
    { echo "FAIL: finetuning from the imported $name differs from the original"; exit 1; }
  # Without --finetune: the imported checkpoint holds weights only (as Megatron's release
  # checkpoints), so training starts at step 0 from them: the same losses.
  "$mxmaca" train "${common[@]}" "$@" --train-iters 2 --load "$name.back" > "$name.c.log" 2>&1 ||
    { echo "FAIL: train --load $name.back without --finetune"; tail -5 "$name.c.log"; exit 1; }
  grep -q "holds weights only (Hugging Face" "$name.c.log" ||
    { echo "FAIL: no weights-only line for $name.back"; grep ' > ' "$name.c.log"; exit 1; }
  diff <(losses "$name.b.log") <(losses "$name.c.log") ||
    { echo "FAIL: --load of the imported $name without --finetune differs"; exit 1; }
  echo "ok: $name ($type): export, import, same tensors and the same finetune losses (also without --finetune)"
}

check llama llama "${llama[@]}"
check gpt2 gpt2 "${gpt2[@]}"
check mixtral mixtral "${mixtral[@]}"
grep -q 'load_balancing_loss' mixtral.b.log || { echo "FAIL: no MoE loss in mixtral.b.log"; exit 1; }
# A checkpoint trained with expert parallelism (EP 2 over 2 data-parallel ranks: each rank
# saved its 2 experts under their global index) exports all 4 and imports back exactly.
"$mxmaca" train "${common[@]}" "${mixtral[@]}" --world-size 2 --expert-model-parallel-size 2 \
  --expert-tensor-parallel-size 1 --train-iters 3 --save ep2 --save-interval 3 > ep2.train.log 2>&1 ||
  { echo "FAIL: training ep2"; tail -5 ep2.train.log; exit 1; }
"$mxmaca" convert --to hf --load ep2 --save ep2.hf > /dev/null
"$mxmaca" convert --from hf --load ep2.hf --save ep2.back > /dev/null
[ "$(model_crcs ep2.back | grep -c 'experts.linear_fc1')" = 8 ] || { echo "FAIL: ep2 experts"; exit 1; }
diff <(model_crcs ep2) <(model_crcs ep2.back) || { echo "FAIL: ep2 round trip"; exit 1; }
echo "ok: an EP 2 checkpoint exports and imports back exactly"

# bf16 in one file; fp32 in 1 MB shards with the index, which the import reads back exactly.
"$mxmaca" convert --to hf --load llama --save llama.bf16 --dtype bf16 --max-shard-size-mb 0 > /dev/null
grep -q '"torch_dtype": "bfloat16"' llama.bf16/config.json || { echo "FAIL: bf16 dtype"; exit 1; }
"$mxmaca" convert --from hf --load llama.bf16 --save llama.bf16.back > /dev/null ||
  { echo "FAIL: import of the bf16 export"; exit 1; }
"$mxmaca" convert --to hf --load llama --save llama.sharded --max-shard-size-mb 1 > /dev/null
[ -f llama.sharded/model.safetensors.index.json ] && [ -f llama.sharded/model-00002-of-00002.safetensors ] ||
  { echo "FAIL: no shards"; ls llama.sharded; exit 1; }
"$mxmaca" convert --from hf --load llama.sharded --save llama.sharded.back > /dev/null
diff <(model_crcs llama) <(model_crcs llama.sharded.back) || { echo "FAIL: sharded round trip"; exit 1; }

# Refusals exit 1 with the value named; --help exits 0.
if "$mxmaca" convert --to hf --load llama --save bad --model-type gpt2 > bad.log 2>&1; then
  echo "FAIL: a RMSNorm model exported as gpt2"; exit 1
fi
grep -q 'normalization is RMSNorm but Hugging Face gpt2 expects LayerNorm' bad.log ||
  { echo "FAIL: refusal message"; cat bad.log; exit 1; }
if "$mxmaca" convert --to hf --load mixtral --save bad3 --model-type llama > bad3.log 2>&1; then
  echo "FAIL: a MoE model exported as llama"; exit 1
fi
grep -q 'Mixture-of-Experts model (--num-experts 4) but Hugging Face llama expects a dense model' \
  bad3.log || { echo "FAIL: MoE refusal message"; cat bad3.log; exit 1; }
if "$mxmaca" convert --from hf --load llama --save bad2 > bad2.log 2>&1; then
  echo "FAIL: an MXMACA checkpoint imported as Hugging Face"; exit 1
fi
grep -q 'llama/config.json does not exist' bad2.log || { echo "FAIL: import message"; cat bad2.log; exit 1; }
"$mxmaca" convert --help | grep -q 'mxmaca convert --from hf' || { echo "FAIL: --help"; exit 1; }
echo "PASS"
