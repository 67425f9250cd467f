"""Random tokenizer test strings, fresh each run: make_random_text.py SEED N OUT.jsonl [SPECIALS]

Mixes ASCII words, contractions in both cases, digit runs, whitespace runs (spaces,
tabs, \\n, \\r\\n, U+00A0, U+3000), letters/marks/symbols from long-assigned Unicode
blocks (Latin-1, Greek, Cyrillic, Hebrew, Arabic, Devanagari, CJK, Hiragana, Hangul,
emoji, combining marks), and the comma-separated SPECIALS strings (added / special
tokens) inside and next to words. Code points whose class differs between JavaScript,
PCRE2 and Oniguruma (U+0085, U+FEFF, anything assigned after Unicode 13) are left out.
"""
import json
import random
import sys

RANGES = [(0x21, 0x7E), (0xA1, 0xFF), (0x391, 0x3C9), (0x410, 0x44F), (0x5D0, 0x5EA),
          (0x627, 0x64A), (0x660, 0x669), (0x905, 0x939), (0x966, 0x96F), (0x4E00, 0x4FFF),
          (0x3041, 0x3096), (0xAC00, 0xAD00), (0x1F600, 0x1F64F), (0x300, 0x36F),
          (0x2200, 0x22FF), (0x2010, 0x2027), (0xFF10, 0xFF19), (0xB2, 0xB3)]
WORDS = ["the", "The", "HELLO", "world", "tokenizer", "Megatron", "don't", "I'm", "WE'LL",
         "they're", "you'VE", "it's", "naïve", "café", "über", "日本語", "данные", "x", "a",
         "HelloWorld", "iPhone", "McDONALDS", "camelCaseWord", "ABCdef", "a/b//", "x\n/"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", " \t "]


def random_string(rng, specials):
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.3:
            parts.append(rng.choice(WORDS))
        elif r < 0.55:
            lo, hi = rng.choice(RANGES)
            parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
        elif r < 0.65:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 8))))
        elif r < 0.75 and specials:
            parts.append(rng.choice(specials))
        elif r < 0.8:
            parts.append(rng.choice(["'s", "'S", "'ll", "'Ll", "'d", "'re", "?!", "...", "\"", "--"]))
        parts.append(rng.choice(SPACES) if rng.random() < 0.7 else "")
    return "".join(parts)


def main():
    seed, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    specials = [s for s in sys.argv[4].split(",") if s] if len(sys.argv) > 4 else []
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        fixed = ["", " ", "Hello world", "  leading spaces", "trailing  ", "\n\n\n", "a\r\nb"]
        for s in fixed + [random_string(rng, specials) for _ in range(n)]:
            f.write(json.dumps(s) + "\n")


if __name__ == "__main__":
    main()
