#!/bin/bash
# data/fuzz/run_fuzzers_tokenizers.sh [SECONDS]: builds data/fuzz/tokenizers_fuzz.cc
# (HuggingFaceTokenizer and TikTokenizer round trips, tokenizer.json loading) with
# clang++ -fsanitize=fuzzer,address,undefined outside Bazel and runs it for SECONDS
# (default 180) on one core. Crash inputs land in $FUZZ_OUT/artifacts/ (FUZZ_OUT
# defaults to /tmp/mxmaca-fuzz; replay with `bazel run //data/fuzz:tokenizers_fuzz -- FILE`).
# Run from the repository root.
set -euo pipefail
SECONDS_TO_RUN="${1:-180}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz}"
CORPUS="$OUT/corpus_tokenizers"
mkdir -p "$CORPUS" "$OUT/artifacts"
printf "\x00Hello world, it's  a\ttest\r\n<m> the<|eot|>" > "$CORPUS/hf1"
printf "\x00\xff\xc3 \xed\xa0\x80x\xf4\x90\x80\x80  \n\n y 12345 caf\xc3\xa9" > "$CORPUS/hf2"
printf "\x01 the thing  \xc3\xa9\xe4\xb8\xad\r\n\xff" > "$CORPUS/tik1"
printf '\x02{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "Metaspace"}, "added_tokens": [{"id": 3, "content": "<m>", "lstrip": true}]}' > "$CORPUS/load1"
SRCS=(
  data/fuzz/tokenizers_fuzz.cc
  data/hf_tokenizer.cc
  data/tiktoken_tokenizer.cc
  data/internal/bpe_merges.cc
  data/internal/hf_components.cc
  data/internal/pcre2_regex.cc
  data/internal/read_file.cc
)
cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/tokenizers_fuzz" "${SRCS[@]}" -lpcre2-8 -licuuc
libfuzzer_run "$OUT/tokenizers_fuzz" "$SECONDS_TO_RUN" 4096 "$OUT/artifacts/" "$CORPUS"
