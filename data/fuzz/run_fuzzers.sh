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
ABSL_LIBS=(-labsl_statusor -labsl_status -labsl_cord -labsl_cord_internal
  -labsl_cordz_functions -labsl_cordz_handle -labsl_cordz_info -labsl_str_format_internal
  -labsl_strings -labsl_strings_internal -labsl_strerror -labsl_int128 -labsl_throw_delegate
  -labsl_synchronization -labsl_graphcycles_internal -labsl_time -labsl_time_zone
  -labsl_hash -labsl_city -labsl_low_level_hash -labsl_raw_hash_set -labsl_stacktrace
  -labsl_symbolize -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal
  -labsl_spinlock_wait -labsl_raw_logging_internal -labsl_log_severity -labsl_base
  -labsl_bad_optional_access -labsl_bad_variant_access -labsl_exponential_biased)

cd "$ROOT"
clang++ -std=c++17 -O1 -g -fno-omit-frame-pointer -DMXMACA_LIBFUZZER \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
  "${SRCS[@]}" "${ABSL_LIBS[@]}" -o "$OUT/tokenizer_fuzz"

"$OUT/tokenizer_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$OUT/artifacts/" "$OUT/corpus_tokenizer"
