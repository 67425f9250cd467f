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

cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/megatron_args_fuzz" "${SRCS[@]}"

# -max_len covers a long flag line (train_kjv.sh's is ~700 bytes).
libfuzzer_run "$OUT/megatron_args_fuzz" "$SECONDS_TO_RUN" 4096 "$OUT/artifacts/" "$OUT/corpus"
