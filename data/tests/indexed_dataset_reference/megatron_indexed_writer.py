#!/usr/bin/python3
"""Reference writer for Megatron-Core's indexed dataset (.bin/.idx), for parity tests.

Written from the facts of megatron/core/datasets/indexed_dataset.py (core_v0.15.0):
IndexedDatasetBuilder.add_item / add_document / end_document / add_index / finalize and
_IndexWriter.write, with numpy and struct only (no torch, no Megatron import).

Usage: megatron_indexed_writer.py SPEC.json
SPEC: {"prefix": OUT, "dtype": "uint16"|"int32"|..., "ops": [OP, ...]} where OP is
  ["item", [tokens...]]            add_item
  ["end"]                          end_document
  ["doc", [tokens...], [lengths]]  add_document
  ["index", OTHER_PREFIX]          add_index
finalize() runs after the last op; it writes OUT.bin and OUT.idx.
"""
import json
import struct
import sys

import numpy

INDEX_HEADER = b"MMIDIDX\x00\x00"
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5,
               "float64": 6, "float32": 7, "uint16": 8}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


def read_index(idx_path):
    """_IndexReader: returns (dtype name, sequence_lengths, document_indices)."""
    with open(idx_path, "rb") as f:
        buf = f.read()
    assert buf[:9] == INDEX_HEADER, idx_path
    (version,) = struct.unpack("<Q", buf[9:17])
    assert version == 1
    (code,) = struct.unpack("<B", buf[17:18])
    (n,) = struct.unpack("<Q", buf[18:26])
    (d,) = struct.unpack("<Q", buf[26:34])
    offset = 34
    lengths = numpy.frombuffer(buf, dtype=numpy.int32, count=n, offset=offset)
    offset += lengths.nbytes
    offset += n * 8  # sequence pointers
    doc_indices = numpy.frombuffer(buf, dtype=numpy.int64, count=d, offset=offset)
    return CODE_DTYPES[code], lengths, doc_indices


class IndexedDatasetBuilder:
    """IndexedDatasetBuilder of indexed_dataset.py: tokens stream to PREFIX.bin,
    lengths and document indices stay in lists until finalize() writes PREFIX.idx."""

    def __init__(self, prefix, dtype_name):
        self.prefix = prefix
        self.dtype_name = dtype_name
        self.dtype = getattr(numpy, dtype_name)
        self.data_file = open(prefix + ".bin", "wb")
        self.sequence_lengths = []
        self.document_indices = [0]

    def add_item(self, tokens):
        arr = numpy.array(tokens, dtype=self.dtype)
        self.data_file.write(arr.tobytes(order="C"))
        self.sequence_lengths.append(arr.size)

    def add_document(self, tokens, lengths):
        arr = numpy.array(tokens, dtype=self.dtype)
        self.data_file.write(arr.tobytes(order="C"))
        self.sequence_lengths.extend(lengths)
        self.document_indices.append(len(self.sequence_lengths))

    def end_document(self):
        self.document_indices.append(len(self.sequence_lengths))

    def add_index(self, other_prefix):
        other_dtype, lengths, doc_indices = read_index(other_prefix + ".idx")
        assert other_dtype == self.dtype_name
        offset = len(self.sequence_lengths)
        self.sequence_lengths.extend(lengths)
        self.document_indices.extend((offset + doc_indices)[1:])
        with open(other_prefix + ".bin", "rb") as other:
            self.data_file.write(other.read())

    def finalize(self):
        self.data_file.close()
        itemsize = numpy.int64(numpy.dtype(self.dtype).itemsize)
        pointers = []
        curr = numpy.int64(0)
        for length in self.sequence_lengths:
            pointers.append(curr.item())
            curr += length * itemsize
        with open(self.prefix + ".idx", "wb") as idx:
            idx.write(INDEX_HEADER)
            idx.write(struct.pack("<Q", 1))
            idx.write(struct.pack("<B", DTYPE_CODES[self.dtype_name]))
            idx.write(struct.pack("<Q", len(self.sequence_lengths)))
            idx.write(struct.pack("<Q", len(self.document_indices)))
            idx.write(numpy.array(self.sequence_lengths, dtype=numpy.int32).tobytes(order="C"))
            idx.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
            idx.write(numpy.array(self.document_indices, dtype=numpy.int64).tobytes(order="C"))


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    builder = IndexedDatasetBuilder(spec["prefix"], spec["dtype"])
    for op in spec["ops"]:
        kind = op[0]
        if kind == "item":
            builder.add_item(op[1])
        elif kind == "end":
            builder.end_document()
        elif kind == "doc":
            builder.add_document(op[1], op[2])
        elif kind == "index":
            builder.add_index(op[1])
        else:
            raise ValueError("unknown op %r" % (kind,))
    builder.finalize()


if __name__ == "__main__":
    main()
