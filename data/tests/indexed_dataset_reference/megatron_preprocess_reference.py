#!/usr/bin/python3
"""Reference for `mxmaca preprocess`: Megatron-LM tools/preprocess_data.py's
process_json_file for GPT2BPETokenizer without --split-sentences, re-typed from its
facts (core_v0.15.0) with the independent pieces of this repository's tests:
GPT-2's encoder.py (../tokenizer_reference/gpt2_encoder_reference.py) and the numpy
IndexedDatasetBuilder (megatron_indexed_writer.py).

  for line in open(input, 'r', encoding='utf-8'):      # universal newlines
      data = json.loads(line)
      for key in json_keys:
          sentences = data[key] if list else [data[key]]
          doc_ids, lens = [], []
          for s in sentences: ids = tokenize(s); if ids: doc_ids += ids; lens += [len(ids)]
          if doc_ids and append_eod: doc_ids.append(eod); lens[-1] += 1
          builders[key].add_document(doc_ids, lens)
  dtype = optimal_dtype(vocab_size): uint16 if vocab_size < 65500 else int32

Usage: megatron_preprocess_reference.py --input IN --output-prefix P --vocab-file V
           --merge-file M [--json-keys K ...] [--append-eod]
Writes P_{K}_document.bin/.idx for every key (Megatron's loop finalizes only the last
key; MXMACA finalizes all, and so does this reference).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tokenizer_reference"))

import gpt2_encoder_reference  # noqa: E402
import megatron_indexed_writer  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output-prefix", required=True)
    parser.add_argument("--vocab-file", required=True)
    parser.add_argument("--merge-file", required=True)
    parser.add_argument("--json-keys", nargs="+", default=["text"])
    parser.add_argument("--append-eod", action="store_true")
    args = parser.parse_args()

    with open(args.vocab_file, encoding="utf-8") as f:
        encoder = json.load(f)
    with open(args.merge_file, encoding="utf-8") as f:
        bpe_merges = [tuple(m.split()) for m in f.read().split("\n")[1:-1]]
    tokenizer = gpt2_encoder_reference.Encoder(encoder, bpe_merges)
    eod = encoder["<|endoftext|>"]
    dtype = "uint16" if len(encoder) < 65500 else "int32"

    builders = {
        key: megatron_indexed_writer.IndexedDatasetBuilder(
            "{}_{}_document".format(args.output_prefix, key), dtype)
        for key in args.json_keys
    }
    with open(args.input, "r", encoding="utf-8") as fin:
        for line in fin:
            data = json.loads(line)
            for key in args.json_keys:
                text = data[key]
                sentences = text if isinstance(text, list) else [text]
                doc_ids, lens = [], []
                for sentence in sentences:
                    ids = tokenizer.encode(sentence)
                    if len(ids) > 0:
                        doc_ids.extend(ids)
                        lens.append(len(ids))
                if len(doc_ids) > 0 and args.append_eod:
                    doc_ids.append(eod)
                    lens[-1] += 1
                builders[key].add_document(doc_ids, lens)
    for builder in builders.values():
        builder.finalize()


if __name__ == "__main__":
    main()
