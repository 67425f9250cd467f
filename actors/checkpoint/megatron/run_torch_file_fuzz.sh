#!/bin/bash
# actors/checkpoint/megatron/run_torch_file_fuzz.sh [SECONDS]: builds torch_file_fuzz.cc
# (the zip reader and the restricted unpickler) with clang++
# -fsanitize=fuzzer,address,undefined outside Bazel and runs it for SECONDS (default 180)
# on one core. Seeds: torch.save files and their data.pkl written by Debian's torch 1.13
# (make_torch_file.py), plus hand-made pickles. Crash inputs land in $FUZZ_OUT/artifacts/
# (FUZZ_OUT defaults to /tmp/mxmaca-fuzz-torch; replay one with
# `bazel run //actors/checkpoint/megatron:torch_file_fuzz -- FILE`).
set -euo pipefail
SECONDS_TO_RUN="${1:-180}"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
OUT="${FUZZ_OUT:-/tmp/mxmaca-fuzz-torch}"
mkdir -p "$OUT/corpus" "$OUT/artifacts" "$OUT/seed_files"

# Seeds: mode byte 1 + a torch.save archive, mode byte 0 + its data.pkl.
/usr/bin/python3 "$ROOT/actors/checkpoint/megatron/make_torch_file.py" "$OUT/seed_files" >/dev/null
/usr/bin/python3 - "$OUT" <<'PY'
import collections, io, os, pickle, sys, zipfile
import torch
out = sys.argv[1]
def seed(name, mode, data):
    open(os.path.join(out, "corpus", name), "wb").write(bytes([mode]) + data)
pt = os.path.join(out, "seed_files", "iter_0000012", "mp_rank_00", "model_optim_rng.pt")
seed("megatron_pt", 1, open(pt, "rb").read())
seed("megatron_pkl", 0, zipfile.ZipFile(pt).read("model_optim_rng/data.pkl"))
buf = io.BytesIO()
torch.save({"w": torch.arange(6.0).view(2, 3).t(), "b": torch.zeros(2, dtype=torch.bfloat16)}, buf)
seed("small_pt", 1, buf.getvalue())
seed("small_pkl", 0, zipfile.ZipFile(io.BytesIO(buf.getvalue())).read("archive/data.pkl")
     if "archive/data.pkl" in zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
     else zipfile.ZipFile(io.BytesIO(buf.getvalue())).read(zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()[0]))
seed("plain", 0, pickle.dumps({"a": [1, 2.5, "x", None, True, (1, 2)], "s": {1, 2}, "b": b"\x00\xff"}, protocol=2))
seed("proto4", 0, pickle.dumps(collections.OrderedDict(a=frozenset([1]), big=2**63 - 1), protocol=4))
PY

SRCS=(
  actors/checkpoint/megatron/torch_file_fuzz.cc
  actors/checkpoint/megatron/zip_archive.cc
  actors/checkpoint/megatron/pickle_reader.cc
  actors/checkpoint/megatron/pickle_value.cc
  actors/checkpoint/megatron/pickle_writer.cc
  actors/checkpoint/file_util.cc
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
  "${SRCS[@]}" "${ABSL_LIBS[@]}" -o "$OUT/torch_file_fuzz"

"$OUT/torch_file_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$OUT/artifacts/" "$OUT/corpus"
