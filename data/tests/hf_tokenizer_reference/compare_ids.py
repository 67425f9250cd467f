"""compare_ids.py NAME INPUT.jsonl OURS.jsonl REFERENCE.jsonl [--roundtrip]

OURS is tokenizer_tool's output (first line: vocab_size/eod header), REFERENCE one
{"ids", "text"} line per input. Fails (exit 1) on the first differing ids or decoded
text; with --roundtrip also requires our decoded text == the input. Prints counts.
"""
import json
import sys


def main():
    name, inp, ours, ref = sys.argv[1:5]
    roundtrip = "--roundtrip" in sys.argv[5:]
    inputs = [json.loads(l) for l in open(inp, encoding="utf-8")]
    a = [json.loads(l) for l in open(ours, encoding="utf-8")][1:]
    b = [json.loads(l) for l in open(ref, encoding="utf-8")]
    assert len(a) == len(inputs) == len(b), (name, len(inputs), len(a), len(b))
    tokens = 0
    for i, (s, x, y) in enumerate(zip(inputs, a, b)):
        if x["ids"] != y["ids"]:
            print(f"{name}: line {i + 1} {s!r}: ids differ\n  ours {x['ids']}\n  ref  {y['ids']}")
            sys.exit(1)
        if x["text"] != y["text"]:
            print(f"{name}: line {i + 1} {s!r}: decode differs\n  ours {x['text']!r}\n  ref  {y['text']!r}")
            sys.exit(1)
        if roundtrip and x["text"] != s:
            print(f"{name}: line {i + 1} {s!r}: decode(encode(s)) = {x['text']!r}")
            sys.exit(1)
        tokens += len(x["ids"])
    print(f"{name}: {len(inputs)} strings, {tokens} tokens: ids and decoded text identical")


if __name__ == "__main__":
    main()
