#!/usr/bin/python3
"""Writes the inputs of //data:gpt2_bpe_tokenizer_parity_test as JSON lines (one
JSON string per line).

  make_inputs.py kjv VERSES.txt OUT.jsonl
      Groups `bible -f "Gen1:1-Rev22:21"` output (lines "Ge1:1 In the beginning...")
      per chapter, the verse lines of a chapter joined by '\\n' (1,189 strings).
  make_inputs.py random SEED COUNT OUT.jsonl
      COUNT random Unicode strings, then 40 long single words: runs drawn from pools of accents, combining
      marks, Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, CJK, kana, Hangul,
      emoji (with ZWJ / variation selectors), digits of several scripts, numeric
      letters, Unicode spaces, tabs, CR/LF/CRLF, contractions, punctuation,
      "<|endoftext|>", GPT-2's own byte characters and any code point at all
      (unassigned and private-use included, surrogates excluded).
"""
import json
import random
import sys


def kjv(verses_path, out_path):
    chapters = []
    keys = []
    with open(verses_path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            key = line.split(":", 1)[0]
            if not keys or keys[-1] != key:
                keys.append(key)
                chapters.append([])
            chapters[-1].append(line)
    if len(chapters) != 1189:
        sys.exit("expected 1189 KJV chapters, got %d" % len(chapters))
    with open(out_path, "w", encoding="utf-8") as out:
        for verses in chapters:
            out.write(json.dumps("\n".join(verses)) + "\n")


def ranges(*pairs):
    return [(lo, hi) for lo, hi in pairs]


POOLS = {
    "latin_accents": ranges((0xC0, 0x24F)),
    "combining": ranges((0x300, 0x36F)),
    "greek": ranges((0x370, 0x3FF)),
    "cyrillic": ranges((0x400, 0x4FF)),
    "hebrew": ranges((0x591, 0x5F4)),
    "arabic": ranges((0x600, 0x6FF)),
    "devanagari": ranges((0x900, 0x97F)),
    "thai": ranges((0xE01, 0xE5B)),
    "cjk": ranges((0x4E00, 0x9FFF), (0x3000, 0x303F), (0x20000, 0x2A6DF)),
    "kana": ranges((0x3040, 0x30FF)),
    "hangul": ranges((0xAC00, 0xD7A3)),
    "emoji": ranges((0x1F300, 0x1FAFF), (0x2600, 0x27BF)),
    "digits": ranges((0x30, 0x39), (0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19),
                     (0x2160, 0x2188), (0xB2, 0xB3), (0xBC, 0xBE), (0x2460, 0x249B)),
    "byte_chars": ranges((0x100, 0x143)),
    "any": ranges((0, 0xD7FF), (0xE000, 0x10FFFF)),
}
ASCII_WORDS = ["the", "The", "LORD", "hello", "world", "it", "don", "I", "we", "you",
               "abc", "x", "Z", "café", "naïve", "A1", "b2b", "ÿ", "Ġ"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'", "''", "'x"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\x0b", "\x0c",
          "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "\u1680", "\ufeff", " \t ",
          "\x1c", "\x1f"]
PUNCT = list(".,;:!?-_()[]{}<>\"'`~@#$%^&*+=/\\|") + ["...", "--", "?!", "“", "”", "—"]
SPECIAL = ["<|endoftext|>", " <|endoftext|>", "<|endoftext|>\n", "\u200d", "\ufe0f",
           "👨\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈", "e\u0301", "ﬁ", "İ", "ß"]


def random_char(rng, pool):
    lo, hi = rng.choice(pool)
    while True:
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def random_piece(rng):
    kind = rng.random()
    if kind < 0.18:
        return rng.choice(ASCII_WORDS)
    if kind < 0.26:
        return rng.choice(CONTRACTIONS)
    if kind < 0.44:
        return rng.choice(SPACES)
    if kind < 0.54:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 3)))
    if kind < 0.58:
        return rng.choice(SPECIAL)
    if kind < 0.62:
        return str(rng.randint(0, 10**rng.randint(1, 12)))
    pool = POOLS[rng.choice(list(POOLS))]
    return "".join(random_char(rng, pool) for _ in range(rng.randint(1, 8)))


def random_strings(seed, count, out_path):
    rng = random.Random(seed)
    with open(out_path, "w", encoding="utf-8") as out:
        for _ in range(count):
            n = rng.randint(1, 12) if rng.random() < 0.9 else rng.randint(30, 200)
            s = "".join(random_piece(rng) for _ in range(n))
            out.write(json.dumps(s) + "\n")
        # Long single words (many merges per word; the C++ side uses a heap there).
        for _ in range(40):
            alphabet = rng.choice(["abcdefghijklmnopqrstuvwxyz", "etaoin", "0123456789",
                                   "!?.,-", "\u00e9\u00e8a", "\u4e00\u4e8c\u4e09"])
            prefix = rng.choice(["", " "])
            out.write(json.dumps(prefix + "".join(rng.choice(alphabet) for _ in range(
                rng.randint(100, 1500)))) + "\n")


def main():
    if sys.argv[1] == "kjv":
        kjv(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "random":
        random_strings(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit("usage: make_inputs.py kjv|random ...")


if __name__ == "__main__":
    main()
