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

cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/indexed_dataset_fuzz" data/fuzz/indexed_dataset_fuzz.cc data/indexed_dataset.cc
libfuzzer_build "$OUT/jsonl_fuzz" data/fuzz/jsonl_fuzz.cc data/jsonl_reader.cc \
  data/json_line_parser.cc

status=0
for target in ${FUZZ_TARGETS:-indexed_dataset jsonl}; do
  corpus="$OUT/corpus_idx"
  [ "$target" = jsonl ] && corpus="$OUT/corpus_jsonl"
  echo "=== ${target}_fuzz for ${SECONDS_TO_RUN}s ==="
  TMPDIR="$OUT/tmp" libfuzzer_run "$OUT/${target}_fuzz" "$SECONDS_TO_RUN" 4096 \
    "$OUT/artifacts/${target}-" "$corpus" || status=1
done
exit $status
