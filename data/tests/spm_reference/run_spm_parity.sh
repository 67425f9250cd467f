#!/bin/bash
# //data:sentencepiece_tokenizer_parity_test: Llama2Tokenizer (--legacy-tokenizer) /
# GPTSentencePieceTokenizer
# (our wrapper of Debian's libsentencepiece) against an independent implementation:
# a BPE + byte-fallback SentencePiece model is trained here with spm_train (Debian
# `sentencepiece`) on KJV verses and random Unicode lines, converted to a Llama-2-layout
# tokenizer.json by spm_to_tokenizer_json.py (LlamaConverter's rules, our own code), and
# encoded by @huggingface/tokenizers (pure JS). Ids must be equal; SentencePiece's decode
# must give back each input; our HuggingFaceTokenizer on the converted tokenizer.json (the
# Metaspace-style BPE path of HuggingFaceTokenizer) must equal the JS ids and text.
# Fresh random strings each run (seed printed; MXMACA_TEST_SEED to repeat).
set -euo pipefail
N="${MXMACA_TOKENIZER_PARITY_STRINGS:-2000}"
SEED="${MXMACA_TEST_SEED:-$(( $(date +%s%N) % 1000000007 ))}"
PY=/usr/bin/python3
HERE="data/tests"
TOOL="data/tokenizer_tool"
WORK="${TEST_TMPDIR:-$(mktemp -d)}"
echo "seed=$SEED strings=$N work=$WORK"
{ bible -f "Gen1:1-Exo40:38"
  "$PY" "$HERE/hf_tokenizer_reference/make_random_text.py" "$((SEED + 1))" 400 /dev/stdout |
    "$PY" -c "import json,sys; [print(json.loads(l).replace('\n', ' ')) for l in sys.stdin]"
} > "$WORK/corpus.txt"
spm_train --input="$WORK/corpus.txt" --model_prefix="$WORK/spm" --vocab_size=1200 \
  --model_type=bpe --byte_fallback=true --normalization_rule_name=identity \
  --remove_extra_whitespaces=false --character_coverage=0.9995 --minloglevel=2 >/dev/null 2>&1
spm_export_vocab --model="$WORK/spm.model" --output="$WORK/vocab.tsv"
"$PY" "$HERE/spm_reference/spm_to_tokenizer_json.py" "$WORK/vocab.tsv" "$WORK/hf"
"$PY" "$HERE/hf_tokenizer_reference/make_random_text.py" "$SEED" "$N" "$WORK/in.jsonl"
node "$HERE/hf_tokenizer_reference/hf_js_encode.cjs" "$WORK/hf" < "$WORK/in.jsonl" > "$WORK/js.jsonl"
"$TOOL" --tokenizer-type=Llama2Tokenizer --tokenizer-model="$WORK/spm.model" \
  --legacy-tokenizer < "$WORK/in.jsonl" > "$WORK/llama2.jsonl"
"$TOOL" --tokenizer-type=HuggingFaceTokenizer --tokenizer-model="$WORK/hf" \
  --legacy-tokenizer < "$WORK/in.jsonl" > "$WORK/hf.jsonl"
"$TOOL" --tokenizer-type=GPTSentencePieceTokenizer --tokenizer-model="$WORK/spm.model" \
  < "$WORK/in.jsonl" > "$WORK/gptsp.jsonl"
"$PY" "$HERE/spm_reference/compare_spm.py" "$WORK/in.jsonl" "$WORK/llama2.jsonl" \
  "$WORK/gptsp.jsonl" "$WORK/js.jsonl"
"$PY" "$HERE/hf_tokenizer_reference/compare_ids.py" "HuggingFaceTokenizer (Llama-2 layout)" \
  "$WORK/in.jsonl" "$WORK/hf.jsonl" "$WORK/js.jsonl"
# HuggingFaceTokenizer's Metaspace pre-tokenizer / decoder layouts against the JS
# reference, on text with the special tokens inside (Metaspace "first" must not
# prepend after them).
"$PY" "$HERE/hf_tokenizer_reference/make_random_text.py" "$((SEED + 2))" "$N" \
  "$WORK/in_specials.jsonl" "<s>,</s>,<unk>"
for layout in metaspace_first metaspace_split; do
  "$PY" "$HERE/spm_reference/spm_to_tokenizer_json.py" "$WORK/vocab.tsv" "$WORK/$layout" "$layout"
  node "$HERE/hf_tokenizer_reference/hf_js_encode.cjs" "$WORK/$layout" \
    < "$WORK/in_specials.jsonl" > "$WORK/$layout.js.jsonl"
  "$TOOL" --tokenizer-type=HuggingFaceTokenizer --tokenizer-model="$WORK/$layout" \
    --legacy-tokenizer < "$WORK/in_specials.jsonl" > "$WORK/$layout.cpp.jsonl"
  "$PY" "$HERE/hf_tokenizer_reference/compare_ids.py" "HuggingFaceTokenizer ($layout)" \
    "$WORK/in_specials.jsonl" "$WORK/$layout.cpp.jsonl" "$WORK/$layout.js.jsonl"
done
# SentencePieceTokenizer: Megatron's special-token split (megatron_sp_reference.py, a
# transcription of _SentencePieceTokenizer.tokenize/detokenize) over the plain
# SentencePiece ids of the gaps (GPTSentencePieceTokenizer = encode_as_ids).
"$PY" "$HERE/hf_tokenizer_reference/make_random_text.py" "$((SEED + 3))" 500 \
  "$WORK/in_sp.jsonl" "<s>,</s>,<EOD>,<CLS>,<SEP>,<MASK>,<PAD>,<extra_id_1>"
"$PY" "$HERE/spm_reference/megatron_sp_reference.py" gaps "$WORK/in_sp.jsonl" "$WORK/gaps.jsonl"
"$TOOL" --tokenizer-type=GPTSentencePieceTokenizer --tokenizer-model="$WORK/spm.model" \
  < "$WORK/gaps.jsonl" > "$WORK/gaps.ids.jsonl"
"$TOOL" --tokenizer-type=SentencePieceTokenizer --tokenizer-model="$WORK/spm.model" \
  --vocab-extra-ids=3 --legacy-tokenizer < "$WORK/in_sp.jsonl" > "$WORK/sp.jsonl"
"$PY" "$HERE/spm_reference/megatron_sp_reference.py" check "$WORK/in_sp.jsonl" \
  "$WORK/gaps.ids.jsonl" "$WORK/sp.jsonl" "$WORK/vocab.tsv" 3
# Without --legacy-tokenizer all three types are megatron/core/tokenizers' SentencePiece
# wrapper: the same output as GPTSentencePieceTokenizer (encode_as_ids, eod = eos).
for type in SentencePieceTokenizer Llama2Tokenizer; do
  "$TOOL" --tokenizer-type=$type --tokenizer-model="$WORK/spm.model" \
    < "$WORK/in.jsonl" > "$WORK/core_$type.jsonl"
  cmp -s "$WORK/core_$type.jsonl" "$WORK/gptsp.jsonl" ||
    { echo "$type without --legacy-tokenizer differs from GPTSentencePieceTokenizer"; exit 1; }
done
echo "SentencePiece without --legacy-tokenizer: SentencePieceTokenizer == Llama2Tokenizer == GPTSentencePieceTokenizer"
echo PASS
