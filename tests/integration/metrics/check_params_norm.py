"""Checks --log-params-norm against a checkpoint, for //tests/integration:metrics_test.

usage: check_params_norm.py LOG SAVE_DIR

The last iteration line's "params norm" must be the L2 norm of the model's parameters as the
checkpoint saved them at that iteration: every logical tensor "model/<name>" once, read
from the safetensors shard files listed in metadata.json (json + numpy only; the shards
tile each tensor exactly once, so the sum of their squares is the tensor's).
"""
import json
import os
import re
import struct
import sys

import numpy as np


def shard_tensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    return {k: np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], dtype="<f4")
            for k, e in header.items()}


def main():
    log, save = sys.argv[1:3]
    norms = []
    with open(log) as f:
        for line in f:
            m = re.search(r"iteration\s+(\d+)/.* params norm: ([0-9.]+) \|", line)
            if m:
                norms.append((int(m.group(1)), float(m.group(2))))
    assert norms, "no 'params norm' in " + log
    with open(os.path.join(save, "latest_checkpointed_iteration.txt")) as f:
        iteration = int(f.read())
    assert norms[-1][0] == iteration, (norms[-1], iteration)
    iter_dir = os.path.join(save, "iter_%07d" % iteration)
    with open(os.path.join(iter_dir, "metadata.json")) as f:
        meta = json.load(f)
    files, total, count = {}, 0.0, 0
    for name, t in meta["tensors"].items():
        if not name.startswith("model/"):
            continue
        count += 1
        for s in t["shards"]:
            if s["file"] not in files:
                files[s["file"]] = shard_tensors(os.path.join(iter_dir, s["file"]))
            total += float(np.sum(files[s["file"]][s["key"]].astype(np.float64) ** 2))
    assert count > 0
    want = total ** 0.5
    got = norms[-1][1]
    assert abs(got - want) <= 5.1e-4 + 1e-6 * want, "log %.3f, checkpoint %.6f" % (got, want)
    print("ok   params norm %.3f at iteration %d = the norm of %d checkpointed tensors (%.6f)"
          % (got, iteration, count, want))


if __name__ == "__main__":
    main()
