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


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    prefix = spec["prefix"]
    dtype = getattr(numpy, spec["dtype"])
    data_file = open(prefix + ".bin", "wb")
    sequence_lengths = []
    document_indices = [0]
    for op in spec["ops"]:
        kind = op[0]
        if kind == "item":
            arr = numpy.array(op[1], dtype=dtype)
            data_file.write(arr.tobytes(order="C"))
            sequence_lengths.append(arr.size)
        elif kind == "end":
            document_indices.append(len(sequence_lengths))
        elif kind == "doc":
            arr = numpy.array(op[1], dtype=dtype)
            data_file.write(arr.tobytes(order="C"))
            sequence_lengths.extend(op[2])
            document_indices.append(len(sequence_lengths))
        elif kind == "index":
            other_dtype, lengths, doc_indices = read_index(op[1] + ".idx")
            assert other_dtype == spec["dtype"]
            offset = len(sequence_lengths)
            sequence_lengths.extend(lengths)
            document_indices.extend((offset + doc_indices)[1:])
            with open(op[1] + ".bin", "rb") as other:
                data_file.write(other.read())
        else:
            raise ValueError("unknown op %r" % (kind,))
    data_file.close()

    itemsize = numpy.int64(numpy.dtype(dtype).itemsize)
    pointers = []
    curr = numpy.int64(0)
    for length in sequence_lengths:
        pointers.append(curr.item())
        curr += length * itemsize
    with open(prefix + ".idx", "wb") as idx:
        idx.write(INDEX_HEADER)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", DTYPE_CODES[spec["dtype"]]))
        idx.write(struct.pack("<Q", len(sequence_lengths)))
        idx.write(struct.pack("<Q", len(document_indices)))
        idx.write(numpy.array(sequence_lengths, dtype=numpy.int32).tobytes(order="C"))
        idx.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
        idx.write(numpy.array(document_indices, dtype=numpy.int64).tobytes(order="C"))


if __name__ == "__main__":
    main()
