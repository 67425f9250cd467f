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

With --partitions N > 1 (main() of preprocess_data.py at core_v0.19.0, transcribed in
make_partitions and main below): the lines of glob.glob(IN) go to the partition files
{name}_{i}{ext} of os.path.splitext(IN), round-robin or (--keep-sequential-samples) in
blocks of ceil(total / N); each partition is encoded to P_{i}_{K}_document and the N
datasets are merged in order 0..N-1 with add_index into P_{K}_document. Partition files
already present are reused, as in Megatron.

Usage: megatron_preprocess_reference.py --input IN --output-prefix P --vocab-file V
           --merge-file M [--json-keys K ...] [--append-eod]
           [--partitions N] [--keep-sequential-samples]
Writes P_{K}_document.bin/.idx for every key (Megatron's loop finalizes only the last
key; MXMACA finalizes all, and so does this reference).
"""
import argparse
import glob
import gzip
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tokenizer_reference"))

import gpt2_encoder_reference  # noqa: E402
import megatron_indexed_writer  # noqa: E402


def get_file_name(args, file_id):
    """preprocess_data.py get_file_name (core_v0.19.0), verbatim: the partition file
    next to the --input pattern, and the partition's output prefix."""
    file_name, extension = os.path.splitext(args.input)
    input_file_name = file_name + "_" + str(file_id) + extension
    sentence_split_file = file_name + "_ss_" + str(file_id) + extension
    output_prefix = args.output_prefix + "_" + str(file_id)
    file_names = {
        'partition': input_file_name,
        'sentence_split': sentence_split_file,
        'output_prefix': output_prefix}
    return file_names


def check_files_exist(in_ss_out_names, key, num_partitions):
    for i in range(num_partitions):
        if not os.path.exists(in_ss_out_names[i][key]):
            return False
    return True


def make_partitions(args):
    """preprocess_data.py main(), partitions > 1, without --split-sentences: the lines
    of glob.glob(--input) (directory order) round-robin into the partition files, or in
    blocks of ceil(total / partitions) lines with --keep-sequential-samples; nothing is
    written when every partition file already exists."""
    in_ss_out_names = []
    in_file_names = glob.glob(args.input)

    # Count total number of lines across .jsonl files
    if args.keep_sequential_samples:
        total_sample_count = 0
        for filename in in_file_names:
            with open(filename, "r") as fin:
                for fc, _ in enumerate(fin):
                    pass
            total_sample_count += (fc + 1)
        partition_size = math.ceil(total_sample_count / args.partitions)

    # create .jsonl parition files
    for idx in range(args.partitions):
        in_ss_out_name = get_file_name(args, idx)
        in_ss_out_names.append(in_ss_out_name)

    # check to see if paritions were already created
    partitions_present = check_files_exist(in_ss_out_names, 'partition', args.partitions)

    # check to see if paritions with split sentences already created
    split_sentences_present = check_files_exist(in_ss_out_names, 'sentence_split', args.partitions)

    if not partitions_present and not split_sentences_present:
        # populate .jsonl partition files from parent files
        partitioned_input_files = []
        for idx in range(args.partitions):
            partitioned_input_file = open(in_ss_out_names[idx]['partition'], 'w')
            partitioned_input_files.append(partitioned_input_file)

        index = 0
        if args.keep_sequential_samples: line_count = 0
        for in_file_name in in_file_names:
            # support for gzip files
            if in_file_name.endswith(".gz"):
                fin = gzip.open(in_file_name, 'rt')
            else:
                fin = open(in_file_name, 'r', encoding='utf-8')

            for line in fin:
                partitioned_input_files[index].write(line)
                if args.keep_sequential_samples:
                    line_count += 1
                    if line_count % partition_size == 0:
                        index += 1
                else:
                    index = (index + 1)%args.partitions

            fin.close()

        for idx in range(args.partitions):
            partitioned_input_files[idx].close()
    return in_ss_out_names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output-prefix", required=True)
    parser.add_argument("--vocab-file", required=True)
    parser.add_argument("--merge-file", required=True)
    parser.add_argument("--json-keys", nargs="+", default=["text"])
    parser.add_argument("--append-eod", action="store_true")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--keep-sequential-samples", action="store_true")
    args = parser.parse_args()

    with open(args.vocab_file, encoding="utf-8") as f:
        encoder = json.load(f)
    with open(args.merge_file, encoding="utf-8") as f:
        bpe_merges = [tuple(m.split()) for m in f.read().split("\n")[1:-1]]
    tokenizer = gpt2_encoder_reference.Encoder(encoder, bpe_merges)
    eod = encoder["<|endoftext|>"]
    dtype = "uint16" if len(encoder) < 65500 else "int32"

    def process_json_file(input_file_name, output_prefix):
        builders = {
            key: megatron_indexed_writer.IndexedDatasetBuilder(
                "{}_{}_document".format(output_prefix, key), dtype)
            for key in args.json_keys
        }
        with open(input_file_name, "r", encoding="utf-8") as fin:
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

    if args.partitions == 1:
        process_json_file(args.input, args.output_prefix)
        return

    in_ss_out_names = make_partitions(args)
    # Megatron runs one process per partition; the order of the runs does not matter.
    for name in in_ss_out_names:
        process_json_file(name['partition'], name['output_prefix'])

    # merge bin/idx partitions
    level = "document"
    for key in args.json_keys:
        builder = megatron_indexed_writer.IndexedDatasetBuilder(
            "{}_{}_{}".format(args.output_prefix, key, level), dtype)
        for name in in_ss_out_names:
            parition_output_prefix = name['output_prefix']
            full_partition_output_prefix = "{}_{}_{}".format(parition_output_prefix,
                                                            key, level)
            builder.add_index(full_partition_output_prefix)
        builder.finalize()


if __name__ == "__main__":
    main()
