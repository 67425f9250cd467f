#!/bin/bash
# data/fuzz/run_fuzzers.sh [SECONDS]: builds data/fuzz/tokenizer_fuzz.cc with
# clang++ -fsanitize=fuzzer,address,undefined (outside Bazel) and runs it for
# SECONDS (default 180) on one core. Crash inputs land in $FUZZ_OUT/artifacts/
# (FUZZ_OUT defaults to /tmp/mxmaca-fuzz; replay one with
# `bazel run //data/fuzz:tokenizer_fuzz -- FILE`).
# Run from the repository root.
set -euo pipefail
SECONDS_TO_RUN="${1:-180}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz}"
mkdir -p "$OUT/corpus_tokenizer" "$OUT/artifacts"

# Seed corpus: a few strings with the pre-tokenizer's tricky cases.
printf "Hello world, it's  a\ttest\r\n" > "$OUT/corpus_tokenizer/seed1"
printf " <|endoftext|> 12,345 don't 'LL \xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89\xc2\x85\xe3\x80\x80" \
  > "$OUT/corpus_tokenizer/seed2"
printf "\xff\xc3 \xed\xa0\x80x\xf4\x90\x80\x80  \n\n y" > "$OUT/corpus_tokenizer/seed3"

SRCS=(
  data/fuzz/tokenizer_fuzz.cc
  data/gpt2_bpe_tokenizer.cc
  data/internal/bpe_merges.cc
  data/internal/pretokenizer.cc
  data/internal/unicode_classes.cc
)

cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/tokenizer_fuzz" "${SRCS[@]}"

libfuzzer_run "$OUT/tokenizer_fuzz" "$SECONDS_TO_RUN" 4096 "$OUT/artifacts/" "$OUT/corpus_tokenizer"
