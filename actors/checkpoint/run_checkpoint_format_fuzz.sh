#!/bin/bash
# actors/checkpoint/run_checkpoint_format_fuzz.sh [SECONDS]: builds
# checkpoint_format_fuzz.cc (metadata.json's tensor index reader and validation, and the
# safetensors shard-header parser) with clang++ -fsanitize=fuzzer,address,undefined outside
# Bazel and runs it for SECONDS (default 180) on one core. Seeds: the committed
# fuzz_corpus/ (a metadata.json of a tiny TP=2 checkpoint after mode byte 0, two shard
# files after mode byte 1, in the layout of docs/CHECKPOINTS.md). Crash inputs land in
# $FUZZ_OUT/artifacts/ (FUZZ_OUT defaults to /tmp/mxmaca-fuzz-ckpt; replay one with
# `bazel run //actors/checkpoint:checkpoint_format_fuzz -- FILE`). Run from anywhere.
set -euo pipefail
SECONDS_TO_RUN="${1:-180}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz-ckpt}"
mkdir -p "$OUT/corpus" "$OUT/artifacts"
cp "$ROOT"/actors/checkpoint/fuzz_corpus/* "$OUT/corpus/"

SRCS=(
  actors/checkpoint/checkpoint_format_fuzz.cc
  actors/checkpoint/checkpoint_format.cc
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
  "${SRCS[@]}" "${ABSL_LIBS[@]}" -o "$OUT/checkpoint_format_fuzz"

"$OUT/checkpoint_format_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$OUT/artifacts/" "$OUT/corpus"
