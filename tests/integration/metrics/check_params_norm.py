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


def checkpoint_norm(iter_dir):
    """The L2 norm of every logical tensor "model/<name>" of one checkpoint, and their count."""
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
    return total ** 0.5, count


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
    logged = dict(norms)
    # Checkpoints store the vocabulary tensors' true-vocabulary rows only (docs/CHECKPOINTS.md
    # "Vocabulary-padded tensors"); the model's padded rows keep their initial values (they
    # get no gradient), so logged^2 - checkpointed^2 is one constant c >= 0 for every saved
    # iteration (0 without padding). Each logged norm is printed to 3 decimals:
    # |d(norm^2)| <= 2 norm 5.1e-4 per value.
    diffs = []
    for it in sorted(logged):
        iter_dir = os.path.join(save, "iter_%07d" % it)
        if not os.path.isdir(iter_dir):
            continue
        want, count = checkpoint_norm(iter_dir)
        got = logged[it]
        diffs.append((it, got * got - want * want, 2 * got * 5.1e-4 + 1e-6 * got * got))
    assert len(diffs) >= 2, ("need two saved iterations with a logged norm", diffs)
    c = diffs[-1][1]
    for it, d, tol in diffs:
        assert d >= -tol, "iteration %d: log norm^2 below the checkpoint's by %g" % (it, -d)
        assert abs(d - c) <= tol + diffs[-1][2], (
            "iteration %d: log^2 - checkpoint^2 = %.6f, at %d: %.6f" % (it, d, diffs[-1][0], c))
    print("ok   params norm at iterations %s = the norm of the %d checkpointed tensors plus the "
          "padded vocabulary rows' constant %.4f (squared)" % ([d[0] for d in diffs], count, c))


if __name__ == "__main__":
    main()
