#!/usr/bin/python3
"""GPT-2's published encoder (openai/gpt-2 src/encoder.py), re-typed as the
independent reference for //data:gpt2_bpe_tokenizer_parity_test.

The algorithm is encoder.py's (which Megatron-LM's gpt2_tokenization.py copies):
`regex` pre-tokenizer, bytes_to_unicode, and the merge loop that repeatedly merges
every occurrence of the lowest-ranked pair. Merges are read as Megatron does:
`read().split('\\n')[1:-1]`.

Usage: gpt2_encoder_reference.py ENCODER_JSON VOCAB_BPE < strings.jsonl > ids.jsonl
(one JSON string per input line, one JSON array of ids per output line).
"""
import json
import sys

import regex as re


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


class Encoder:
    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}
        self.pat = re.compile(
            r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        bpe_tokens = []
        for token in re.findall(self.pat, text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            bpe_tokens.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return bpe_tokens


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        encoder = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        bpe_data = f.read()
    bpe_merges = [tuple(m.split()) for m in bpe_data.split("\n")[1:-1]]
    enc = Encoder(encoder, bpe_merges)
    out = sys.stdout
    for line in sys.stdin:
        out.write(json.dumps(enc.encode(json.loads(line))) + "\n")


if __name__ == "__main__":
    main()
