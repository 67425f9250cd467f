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

cd "$ROOT"
source tools/libfuzzer.sh
libfuzzer_build "$OUT/torch_file_fuzz" "${SRCS[@]}"

libfuzzer_run "$OUT/torch_file_fuzz" "$SECONDS_TO_RUN" 65536 "$OUT/artifacts/" "$OUT/corpus"
