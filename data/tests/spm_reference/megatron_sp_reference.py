"""Megatron's _SentencePieceTokenizer special-token logic, transcribed from
megatron/training/tokenizer/tokenizer.py (Megatron-Core 0.19), over SentencePiece ids
computed elsewhere.

  megatron_sp_reference.py gaps INPUT.jsonl GAPS.jsonl
      writes every text gap between special tokens (Megatron's tokenize loop) as JSON
      strings, for encoding with plain SentencePiece (GPTSentencePieceTokenizer).
  megatron_sp_reference.py check INPUT.jsonl GAPS_IDS.jsonl OURS.jsonl VOCAB.tsv EXTRA
      rebuilds Megatron's ids and detokenized text from the gaps' ids/texts and checks
      SentencePieceTokenizer's output (tokenizer_tool) against them, and its header
      (vocab_size, eod) against _initalize's special-token layout.
"""
import json
import sys


def specials_layout(pieces, extra):
    """_initalize: the special tokens in insertion order -> id; vocab size; eod."""
    vocab = {p: i for i, p in reversed(list(enumerate(pieces)))}
    specials = {}

    def add(t):
        if t not in vocab:
            vocab[t] = len(vocab)
        specials[t] = vocab[t]

    for t in ["<CLS>", "<SEP>", "<EOD>", "<MASK>"]:
        add(t)
    # The trained model has no pad (pad_id -1 -> "<PAD>"), bos <s> = 1, eos </s> = 2.
    add("<PAD>")
    add(pieces[1])
    add(pieces[2])
    for i in range(extra):
        add("<extra_id_{}>".format(i))
    return specials, len(vocab), vocab["<EOD>"]


SPECIAL_ORDER = ["<CLS>", "<SEP>", "<EOD>", "<MASK>", "<PAD>", "<s>", "</s>"]


def split(text, specials):
    """tokenize's loop: [("gap", str) | ("special", token)]."""
    out = []
    idx = 0
    while 1:
        indices = {}
        for token in specials:
            try:
                indices[token] = text[idx:].index(token)
            except ValueError:
                continue
        if len(indices) == 0:
            break
        next_token = min(indices, key=indices.get)
        next_idx = idx + indices[next_token]
        out.append(("gap", text[idx:next_idx]))
        out.append(("special", next_token))
        idx = next_idx + len(next_token)
    out.append(("gap", text[idx:]))
    return out


def main():
    mode = sys.argv[1]
    # For "gaps" only the special tokens' strings matter (ids do not).
    names = SPECIAL_ORDER + ["<extra_id_{}>".format(i) for i in range(3)]
    if mode == "gaps":
        with open(sys.argv[3], "w") as f:
            for line in open(sys.argv[2], encoding="utf-8"):
                for kind, s in split(json.loads(line), {n: 0 for n in names}):
                    if kind == "gap":
                        f.write(json.dumps(s) + "\n")
        return
    inp, gaps_ids, ours, vocab_tsv, extra = sys.argv[2:7]
    extra = int(extra)
    pieces = [l.rstrip("\n").split("\t")[0]
              for l in open(vocab_tsv, encoding="utf-8", newline="\n")]
    specials, vocab_size, eod = specials_layout(pieces, extra)
    assert list(specials)[:7] == SPECIAL_ORDER, list(specials)
    inv = {v: k for k, v in specials.items()}
    gap_lines = [json.loads(l) for l in open(gaps_ids, encoding="utf-8")][1:]
    got = [json.loads(l) for l in open(ours, encoding="utf-8")]
    assert got[0] == {"eod": eod, "vocab_size": vocab_size}, (got[0], eod, vocab_size)
    got = got[1:]
    g = 0
    n = 0
    for i, line in enumerate(open(inp, encoding="utf-8")):
        text = json.loads(line)
        ids = []
        detok = ""
        for kind, s in split(text, specials):
            if kind == "gap":
                ids += gap_lines[g]["ids"]
                run_text = gap_lines[g]["text"]  # decode_ids of this run
                g += 1
            else:
                ids.append(specials[s])
                detok += run_text + " " + s + " "
        detok += run_text
        if got[i]["ids"] != ids:
            print(f"line {i + 1} {text!r}: SentencePieceTokenizer ids\n  ours {got[i]['ids']}\n  want {ids}")
            sys.exit(1)
        # detokenize: decode runs between special ids, joined by " tok ".
        if got[i]["text"] != detok:
            print(f"line {i + 1} {text!r}: SentencePieceTokenizer detokenize\n  ours {got[i]['text']!r}\n  want {detok!r}")
            sys.exit(1)
        n += 1
    assert g == len(gap_lines)
    print(f"SentencePieceTokenizer: {n} strings with special tokens: ids and detokenized text == Megatron's "
          f"(vocab_size {vocab_size}, eod {eod})")


if __name__ == "__main__":
    main()
