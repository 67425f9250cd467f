"""compare_spm.py INPUT.jsonl LLAMA2.jsonl GPTSP.jsonl JS.jsonl

LLAMA2 / GPTSP: tokenizer_tool output for Llama2Tokenizer and GPTSentencePieceTokenizer
(header line first); JS: @huggingface/tokenizers on the converted tokenizer.json, which
prepends <s> (id 1) like Llama2Tokenizer. Checks: Llama2 ids == JS ids; GPTSP ids ==
Llama2 ids without the leading bos; both decode back to the input; eod = eos = 2.
"""
import json
import sys


def main():
    inp = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
    l2 = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
    gp = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8")]
    js = [json.loads(l) for l in open(sys.argv[4], encoding="utf-8")]
    assert l2[0] == {"eod": 2, "vocab_size": 1200}, l2[0]
    assert gp[0] == {"eod": 2, "vocab_size": 1200}, gp[0]
    l2, gp = l2[1:], gp[1:]
    assert len(inp) == len(l2) == len(gp) == len(js)
    tokens = 0
    for i, (s, a, g, b) in enumerate(zip(inp, l2, gp, js)):
        if a["ids"] != b["ids"]:
            print(f"line {i + 1} {s!r}: Llama2Tokenizer ids differ from JS\n  ours {a['ids']}\n  js   {b['ids']}")
            sys.exit(1)
        if g["ids"] != a["ids"][1:] or a["ids"][0] != 1:
            print(f"line {i + 1} {s!r}: GPTSentencePieceTokenizer {g['ids']} vs Llama2 {a['ids']}")
            sys.exit(1)
        if a["text"] != s or g["text"] != s:
            print(f"line {i + 1} {s!r}: decode gives {a['text']!r} / {g['text']!r}")
            sys.exit(1)
        tokens += len(a["ids"])
    print(f"SentencePiece: {len(inp)} strings, {tokens} tokens: Llama2Tokenizer ids == JS, "
          "GPTSentencePieceTokenizer == Llama2 minus bos, decode round-trips")


if __name__ == "__main__":
    main()
