#!/bin/bash
# data/fuzz/run_fuzzers_idx.sh [SECONDS]: builds data/fuzz/indexed_dataset_fuzz.cc and
# data/fuzz/jsonl_fuzz.cc with clang++ -fsanitize=fuzzer,address,undefined (outside
# Bazel) and runs each for SECONDS (default 150) on one core. Crash inputs land in
# $FUZZ_OUT/artifacts/ (FUZZ_OUT defaults to /tmp/mxmaca-fuzz-idx; replay one with
# `bazel run //data/fuzz:indexed_dataset_fuzz -- FILE` or `//data/fuzz:jsonl_fuzz`).
# FUZZ_TARGETS="jsonl" runs one target only. Run from anywhere; the tokenizer's target
# has its own script, run_fuzzers.sh.
set -euo pipefail
SECONDS_TO_RUN="${1:-150}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz-idx}"
mkdir -p "$OUT/corpus_idx" "$OUT/corpus_jsonl" "$OUT/artifacts" "$OUT/tmp"

# Seeds for the index fuzzer: flags byte (bin exists, size matching), 2 size bytes,
# then a valid .idx (uint16 and int32, with an empty document and a two-sequence one).
/usr/bin/python3 - "$OUT/corpus_idx" <<'PY'
import struct, sys
def idx(code, lengths, doc_indices, item):
    ptrs, p = [], 0
    for l in lengths:
        ptrs.append(p); p += l * item
    return (b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, len(lengths), len(doc_indices))
            + struct.pack("<%di" % len(lengths), *lengths)
            + struct.pack("<%dq" % len(ptrs), *ptrs)
            + struct.pack("<%dq" % len(doc_indices), *doc_indices))
seeds = [
    b"\x03\x00\x00" + idx(8, [3, 1, 2], [0, 2, 2, 3], 2),
    b"\x03\x00\x00" + idx(4, [5, 0, 7, 1], [0, 1, 3, 4], 4),
    b"\x01\x10\x00" + idx(5, [2], [0, 1], 8),
    b"\x03\x00\x00" + idx(1, [], [0], 1),
]
for i, s in enumerate(seeds):
    open("%s/seed%d" % (sys.argv[1], i), "wb").write(s)
PY
printf '{"text": "a b", "title": "t"}\n{"title": "x", "text": ["s1", ""]}\r\n' > "$OUT/corpus_jsonl/seed1"
printf '{"text": "\\u00e9\\ud83d\\ude00\\n", "title": "", "n": [1, {"a": null}]}' > "$OUT/corpus_jsonl/seed2"

ABSL_LIBS=(-labsl_statusor -labsl_status -labsl_cord -labsl_cord_internal
  -labsl_cordz_functions -labsl_cordz_handle -labsl_cordz_info -labsl_str_format_internal
  -labsl_strings -labsl_strings_internal -labsl_strerror -labsl_int128 -labsl_throw_delegate
  -labsl_synchronization -labsl_graphcycles_internal -labsl_time -labsl_time_zone
  -labsl_hash -labsl_city -labsl_low_level_hash -labsl_raw_hash_set -labsl_stacktrace
  -labsl_symbolize -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal
  -labsl_spinlock_wait -labsl_raw_logging_internal -labsl_log_severity -labsl_base
  -labsl_bad_optional_access -labsl_bad_variant_access -labsl_exponential_biased)
FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -DMXMACA_LIBFUZZER
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)

cd "$ROOT"
clang++ "${FLAGS[@]}" data/fuzz/indexed_dataset_fuzz.cc data/indexed_dataset.cc \
  "${ABSL_LIBS[@]}" -o "$OUT/indexed_dataset_fuzz"
clang++ "${FLAGS[@]}" data/fuzz/jsonl_fuzz.cc data/jsonl_reader.cc data/json_line_parser.cc \
  "${ABSL_LIBS[@]}" -o "$OUT/jsonl_fuzz"

status=0
for target in ${FUZZ_TARGETS:-indexed_dataset jsonl}; do
  corpus="$OUT/corpus_idx"
  [ "$target" = jsonl ] && corpus="$OUT/corpus_jsonl"
  echo "=== ${target}_fuzz for ${SECONDS_TO_RUN}s ==="
  TMPDIR="$OUT/tmp" "$OUT/${target}_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 \
    -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$OUT/artifacts/${target}-" "$corpus" || status=1
done
exit $status
