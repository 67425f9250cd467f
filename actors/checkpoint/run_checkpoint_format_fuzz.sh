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

cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/checkpoint_format_fuzz" "${SRCS[@]}"

libfuzzer_run "$OUT/checkpoint_format_fuzz" "$SECONDS_TO_RUN" 16384 "$OUT/artifacts/" "$OUT/corpus"
