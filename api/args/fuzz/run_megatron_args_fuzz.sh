#!/bin/bash
# api/args/fuzz/run_megatron_args_fuzz.sh [SECONDS]: builds megatron_args_fuzz.cc (the
# flag parser ParseMegatronArgs and ValidateAndDeriveArgs) with clang++
# -fsanitize=fuzzer,address,undefined outside Bazel and runs it for SECONDS (default 180)
# on one core. Seeds: the committed corpus/ (flag lines of examples/train_kjv.sh, one token
# a line after a world-size byte). Crash inputs land in $FUZZ_OUT/artifacts/ (FUZZ_OUT
# defaults to /tmp/mxmaca-fuzz-args; replay one with
# `bazel run //api/args/fuzz:megatron_args_fuzz -- FILE`). Run from anywhere.
set -euo pipefail
SECONDS_TO_RUN="${1:-180}"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz-args}"
mkdir -p "$OUT/corpus" "$OUT/artifacts"
cp "$ROOT"/api/args/fuzz/corpus/* "$OUT/corpus/"

SRCS=(
  api/args/fuzz/megatron_args_fuzz.cc
  api/args/megatron_args.cc
  api/args/megatron_args_validate.cc
  api/args/did_you_mean.cc
  api/args/flag_table.cc
  api/args/flag_table_system.cc
  api/args/flag_table_training.cc
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
  "${SRCS[@]}" "${ABSL_LIBS[@]}" -o "$OUT/megatron_args_fuzz"

# -max_len covers a long flag line (train_kjv.sh's is ~700 bytes).
"$OUT/megatron_args_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$OUT/artifacts/" "$OUT/corpus"
