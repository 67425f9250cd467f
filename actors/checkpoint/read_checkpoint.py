"""Reads an MXMACA checkpoint with nothing but json and numpy, to show the format is
externally checkable (docs/CHECKPOINTS.md).

usage: read_checkpoint.py SAVE_DIR EXPECTED_DIR

SAVE_DIR is a --save directory. For every logical tensor NAME in the checkpoint that
latest_checkpointed_iteration.txt points at, EXPECTED_DIR holds NAME with '/' replaced by
'__' plus '.f32': the full tensor's values as raw little-endian float32, written by the test
independently of the checkpoint code. Every shard file is parsed per the safetensors spec,
every tensor is assembled from its shards by the offsets in metadata.json (each box's
CRC-32C checked), and the result must equal the expected bytes exactly. Prints
"OK <n tensors>" and exits 0, or exits 1 with the first mismatch.
"""
import json
import os
import struct
import sys

import numpy as np


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli, RFC 3720), pure Python: fine for test-sized tensors."""
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8 != 0:
        fail(f"{path}: header length {n} is not a multiple of 8")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    if meta.get("format") != "pt":
        fail(f"{path}: __metadata__.format is {meta.get('format')!r}, expected 'pt'")
    tensors, end = {}, 0
    for key, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if entry["dtype"] != "F32":
            fail(f"{path}: {key} dtype {entry['dtype']}")
        b, e = entry["data_offsets"]
        if b != end:
            fail(f"{path}: {key} starts at {b}, expected {end} (buffer must be tiled)")
        end = e
        tensors[key] = np.frombuffer(data[b:e], dtype="<f4").reshape(entry["shape"])
    if end != len(data):
        fail(f"{path}: data buffer is {len(data)} bytes, header covers {end}")
    return tensors, meta


def main():
    if crc32c(b"123456789") != 0xE3069283:
        fail("crc32c check value")
    save_dir, expected_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt")) as f:
        text = f.read()
    if text != text.strip():
        fail("tracker file has whitespace")
    iteration = int(text)
    iter_dir = os.path.join(save_dir, "iter_%07d" % iteration)
    with open(os.path.join(iter_dir, "metadata.json")) as f:
        meta = json.load(f)
    if meta["format"] != "mxmaca-checkpoint" or meta["version"] != 1:
        fail("metadata format/version")
    if meta["iteration"] != iteration:
        fail("metadata iteration")
    files = {}
    for name, t in meta["tensors"].items():
        if t["dtype"] != "F32":
            fail(f"{name}: dtype {t['dtype']}")
        full = np.full(t["shape"], np.nan, dtype="<f4")
        seen = np.zeros(t["shape"], dtype=np.int32)
        for s in t["shards"]:
            if s["file"] not in files:
                files[s["file"]] = read_safetensors(os.path.join(iter_dir, s["file"]))
            tensors, file_meta = files[s["file"]]
            info = json.loads(file_meta["mxmaca.shards"])[s["key"]]
            if info["name"] != name or info["offsets"] != s["offsets"]:
                fail(f"{s['file']}: __metadata__ for {s['key']} disagrees with metadata.json")
            box = tuple(slice(o, o + n) for o, n in zip(s["offsets"], s["shape"]))
            part = tensors[s["key"]]
            if list(part.shape) != s["shape"]:
                fail(f"{name}: shard shape {part.shape} vs index {s['shape']}")
            if crc32c(part.tobytes()) != s["crc32c"]:
                fail(f"{s['file']}: {s['key']} CRC-32C differs from metadata.json")
            full[box] = part
            seen[box] += 1
        if not (seen == 1).all():
            fail(f"{name}: shards do not cover every element exactly once")
        exp_path = os.path.join(expected_dir, name.replace("/", "__") + ".f32")
        expected = np.fromfile(exp_path, dtype="<f4").reshape(t["shape"])
        if full.tobytes() != expected.tobytes():
            bad = np.argwhere(full.view("<u4") != expected.view("<u4"))[0]
            fail(f"{name}: element {bad.tolist()} differs from the values the test wrote")
    if not meta["tensors"]:
        fail("no tensors")
    print(f"OK {len(meta['tensors'])}")


if __name__ == "__main__":
    main()
