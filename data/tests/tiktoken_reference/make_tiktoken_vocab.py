"""make_tiktoken_vocab.py ENCODER_DIR OUT.json [N_MERGES]

A tiktoken vocabulary in the JSON form Megatron's reload_mergeable_ranks reads (a
list of {"rank", "token_bytes" (base64), "token_str"}), built from GPT-2's real merges:
ranks 0..255 are the single bytes, then the bytes of each merge's result in merge
order (first occurrence) — the construction of tiktoken's own "gpt2" ranks.
"""
import base64
import json
import sys


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    enc_dir, out = sys.argv[1], sys.argv[2]
    n_merges = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    dec = byte_decoder()
    with open(enc_dir + "/vocab.bpe", encoding="utf-8") as f:
        merges = [tuple(l.split()) for l in f.read().split("\n")[1:-1]][:n_merges]
    tokens = [bytes([i]) for i in range(256)]
    seen = set(tokens)
    for a, b in merges:
        t = bytes(dec[c] for c in a + b)
        if t not in seen:
            seen.add(t)
            tokens.append(t)
    with open(out, "w") as f:
        json.dump([{"rank": i, "token_bytes": base64.b64encode(t).decode(),
                    "token_str": t.decode("utf-8", errors="replace")}
                   for i, t in enumerate(tokens)], f)
    print(f"{out}: {len(tokens)} ranks")


if __name__ == "__main__":
    main()
