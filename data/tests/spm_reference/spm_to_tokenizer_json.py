"""spm_to_tokenizer_json.py VOCAB.tsv OUT_DIR [LAYOUT]

Converts a SentencePiece BPE model (its `spm_export_vocab` listing: piece TAB score,
in id order) with byte_fallback into a Llama-2-layout Hugging Face tokenizer.json, the
way transformers' LlamaConverter does: vocab = pieces; merges = every split of a
normal piece into two normal pieces, ranked by the merged piece's id (then the left,
then the right piece's id); normalizer Prepend("▁") + Replace(" ", "▁"); BPE with
byte_fallback and fuse_unk; decoder Replace("▁", " "), ByteFallback, Fuse, Strip(1
leading space); post_processor TemplateProcessing "<s> $A"; <unk> <s> </s> added.
LAYOUT (default "llama2") may instead be "metaspace_first" (LlamaConverter with
legacy=False: no normalizer, Metaspace pre-tokenizer prepend_scheme "first", split
false) or "metaspace_split" (Metaspace prepend "always", split true, Metaspace decoder).
Written independently of SentencePiece's code: the reference implementation that
reads it is @huggingface/tokenizers (JavaScript).
"""
import json
import os
import re
import sys


def main():
    vocab_tsv, out = sys.argv[1], sys.argv[2]
    pieces = [l.rstrip("\n").split("\t")[0] for l in open(vocab_tsv, encoding="utf-8", newline="\n")]
    vocab = {p: i for i, p in enumerate(pieces)}
    special = {"<unk>", "<s>", "</s>"}
    byte_piece = re.compile(r"^<0x[0-9A-F]{2}>$")
    normal = {p for p in pieces if p not in special and not byte_piece.match(p)}
    merges = []
    for merged in normal:
        for k in range(1, len(merged)):
            a, b = merged[:k], merged[k:]
            if a in normal and b in normal:
                merges.append((vocab[merged], vocab[a], vocab[b], a, b))
    merges.sort()
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for s in ["<unk>", "<s>", "</s>"]],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]],
                                                      "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for _, _, _, a, b in merges]},
    }
    layout = sys.argv[3] if len(sys.argv) > 3 else "llama2"
    if layout == "metaspace_first":
        tj["normalizer"] = None
        tj["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                               "prepend_scheme": "first", "split": False}
    elif layout == "metaspace_split":
        tj["normalizer"] = None
        tj["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                               "prepend_scheme": "always", "split": True}
        tj["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
             "split": True},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "clean_up_tokenization_spaces": False, "legacy": False}, f)


if __name__ == "__main__":
    main()
