"""Python reference for MXMACA's GPT dataset code: a numpy port of Megatron-Core's
GPTDataset / BlendedDataset / BlendedMegatronDatasetBuilder index logic (core_v0.15.0:
megatron/core/datasets/gpt_dataset.py, helpers.cpp build_sample_idx and
build_blending_indices / build_exhaustive_blending_indices, blended_dataset.py,
blended_megatron_dataset_builder.py, blended_megatron_dataset_config.py, utils.py) and of
gpt_dataset.py's _get_ltor_masks_and_position_ids. Written from Megatron's algorithm,
independently of the C++ under test.

usage: gpt_reference.py IN.json OUT.json

IN is {"mode": "build", ...} or {"mode": "masks", ...}; see build_mode / masks_mode.
Low-level datasets are {"prefix": path} (a Megatron .bin/.idx pair, read here with numpy)
or {"sizes": [...], "id": k} (synthetic: token(seq, pos) = synthetic_token(k, seq, pos)).
"""
import functools
import json
import math
import re
import sys

import numpy


# ---------------------------------------------------------------- low-level data


def synthetic_token(dataset_id, seq, pos):
    return (dataset_id * 7777 + seq * 1000003 + pos * 7919) % 50257


class SyntheticLowLevel:
    def __init__(self, sizes, dataset_id):
        self.sequence_lengths = numpy.array(sizes, dtype=numpy.int32)
        self.dataset_id = dataset_id

    def get(self, idx, offset=0, length=None):
        if length is None:
            length = self.sequence_lengths[idx] - offset
        return numpy.array(
            [synthetic_token(self.dataset_id, int(idx), int(offset) + p) for p in range(int(length))],
            dtype=numpy.int64)


_DTYPES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32,
           5: numpy.int64, 6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}


class IdxLowLevel:
    """Megatron indexed dataset reader (indexed_dataset.py _IndexReader), numpy only."""

    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            assert f.read(9) == b"MMIDIDX\x00\x00"
            assert numpy.frombuffer(f.read(8), "<u8")[0] == 1
            self.dtype = _DTYPES[f.read(1)[0]]
            n = int(numpy.frombuffer(f.read(8), "<u8")[0])
            d = int(numpy.frombuffer(f.read(8), "<u8")[0])
            self.sequence_lengths = numpy.frombuffer(f.read(4 * n), "<i4").copy()
            self.pointers = numpy.frombuffer(f.read(8 * n), "<i8").copy()
        self.bin = numpy.memmap(prefix + ".bin", dtype=numpy.uint8, mode="r")

    def get(self, idx, offset=0, length=None):
        if length is None:
            length = self.sequence_lengths[idx] - offset
        item = numpy.dtype(self.dtype).itemsize
        start = int(self.pointers[idx]) + int(offset) * item
        return numpy.frombuffer(self.bin[start:start + int(length) * item].tobytes(),
                                dtype=self.dtype).astype(numpy.int64)


class MockLowLevel:
    """MockGPTLowLevelDataset (core_v0.19.0: the tokens modulo the tokenizer's vocab_size;
    vocab_size None here for the earlier, unreduced tokens)."""

    def __init__(self, eod, vocab_size=None):
        rng = numpy.random.default_rng(seed=0)
        self.sequence_lengths = rng.integers(low=1, high=4096, size=100000, dtype=numpy.int32)
        self.eod = eod
        self.vocab_size = vocab_size

    def get(self, idx, offset=0, length=None):
        n = self.sequence_lengths[idx]
        tokens = numpy.arange(n - 1) + 1
        if self.vocab_size:
            tokens = tokens % self.vocab_size
        sample = numpy.int64(numpy.concatenate([tokens, [self.eod]]))
        if length is None:
            length = n - offset
        return sample[offset:offset + length]


# ---------------------------------------------------------------- helpers.cpp


def build_sample_idx(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch):
    num_samples = (num_epochs * tokens_per_epoch - 1) // seq_length
    sample_idx = numpy.zeros((num_samples + 1, 2), dtype=numpy.int64)
    sample_index = 1
    doc_idx_index = 0
    doc_offset = 0
    while sample_index <= num_samples:
        remaining = seq_length + 1
        while remaining != 0:
            doc_length = int(sizes[doc_idx[doc_idx_index]]) - doc_offset
            remaining -= doc_length
            if remaining <= 0:
                doc_offset += remaining + doc_length - 1
                remaining = 0
            else:
                if doc_idx_index == len(doc_idx) - 1:
                    assert sample_index == num_samples
                    doc_offset = int(sizes[doc_idx[doc_idx_index]]) - 1
                    break
                doc_idx_index += 1
                doc_offset = 0
        sample_idx[sample_index] = (doc_idx_index, doc_offset)
        sample_index += 1
    return sample_idx


def build_blending_indices(weights, size):
    dataset_index = numpy.zeros(size, dtype=numpy.int16)
    dataset_sample_index = numpy.zeros(size, dtype=numpy.int64)
    current = [0] * len(weights)
    for sample_idx in range(size):
        s = max(float(sample_idx), 1.0)
        max_error_index = 0
        max_error = weights[0] * s - float(current[0])
        for d in range(1, len(weights)):
            error = weights[d] * s - float(current[d])
            if error > max_error:
                max_error = error
                max_error_index = d
        dataset_index[sample_idx] = max_error_index
        dataset_sample_index[sample_idx] = current[max_error_index]
        current[max_error_index] += 1
    return dataset_index, dataset_sample_index


def build_exhaustive_blending_indices(sizes):
    total = sum(sizes)
    weights = [s / float(total) for s in sizes]
    counts = [0] * len(sizes)
    unspent = sorted(i for i in range(len(sizes)) if sizes[i] > 0)
    dataset_index, dataset_sample_index = [], []
    index_sample = 0
    while unspent:
        s = max(float(index_sample), 1.0)
        arg, best = -1, -float("inf")
        for d in unspent:
            error = weights[d] * s - float(counts[d])
            if error > best:
                arg, best = d, error
        dataset_index.append(arg)
        dataset_sample_index.append(counts[arg])
        counts[arg] += 1
        if sizes[arg] - counts[arg] == 0:
            unspent.remove(arg)
        index_sample += 1
    return (numpy.array(dataset_index, dtype=numpy.int16),
            numpy.array(dataset_sample_index, dtype=numpy.int64))


# ---------------------------------------------------------------- gpt_dataset.py


def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def parse_split_matrix(split):
    vector = list(map(float, re.findall(r"[.0-9]+", split)))
    vector = vector + [0.0 for _ in range(3 - len(vector))]
    vector = normalize(vector)
    expansion = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *vector])
    matrix = []
    for b0, b1 in zip(expansion[:-1], expansion[1:]):
        matrix.append(None if b1 <= b0 else (b0, b1))
    return matrix


def build_document_index(documents, num_epochs, rs, separate_final_epoch):
    if not separate_final_epoch or num_epochs == 1:
        document_index = numpy.mgrid[0:num_epochs, 0:len(documents)][1]
        document_index[:] = documents
        document_index = document_index.reshape(-1).astype(numpy.int32)
        rs.shuffle(document_index)
        return document_index
    first = build_document_index(documents, num_epochs - 1, rs, False)
    last = build_document_index(documents, 1, rs, False)
    return numpy.concatenate((first, last))


def build_shuffle_index(num_samples, total_size, rs):
    dtype_ = numpy.uint32
    if total_size >= (numpy.iinfo(numpy.uint32).max - 1):
        dtype_ = numpy.int64
    first = numpy.arange(start=0, stop=num_samples, step=1, dtype=dtype_)
    rs.shuffle(first)
    if num_samples == total_size:
        return first
    last = numpy.arange(start=num_samples, stop=total_size, step=1, dtype=dtype_)
    rs.shuffle(last)
    return numpy.concatenate((first, last))


class GPTDataset:
    def __init__(self, low, indices, num_samples, seq_length, seed):
        self.low = low
        self.seq_length = seq_length
        tokens_per_epoch = int(numpy.sum(low.sequence_lengths[indices]))
        num_epochs = 1
        if num_samples is not None:
            num_tokens = tokens_per_epoch
            requested = num_samples * seq_length + 1
            while num_tokens < requested:
                num_epochs += 1
                num_tokens += tokens_per_epoch
        separate = False
        if num_epochs > 1:
            sans = ((num_epochs - 1) * tokens_per_epoch - 1) // seq_length
            from_final = num_samples - sans
            per_epoch = (tokens_per_epoch - 1) // seq_length
            assert 0 <= from_final <= per_epoch + 1
            separate = from_final < int(0.80 * per_epoch)
        rs = numpy.random.RandomState(seed)
        self.document_index = build_document_index(indices, num_epochs, rs, separate)
        self.sample_index = build_sample_idx(low.sequence_lengths, self.document_index,
                                             seq_length, num_epochs, tokens_per_epoch)
        total = self.sample_index.shape[0] - 1
        if separate:
            self.shuffle_index = build_shuffle_index(sans, total, rs)
        else:
            self.shuffle_index = build_shuffle_index(total, total, rs)
        self.num_epochs = num_epochs
        self.separate_final_epoch = separate

    def __len__(self):
        return self.sample_index.shape[0] - 1

    def __getitem__(self, idx):
        idx = self.shuffle_index[idx]
        beg, beg_off = self.sample_index[idx]
        end, end_off = self.sample_index[idx + 1]
        if beg == end:
            parts = [self.low.get(self.document_index[beg], offset=beg_off,
                                  length=end_off - beg_off + 1)]
        else:
            parts = []
            for i in range(beg, end + 1):
                offset = 0 if i > beg else beg_off
                length = None if i < end else end_off + 1
                parts.append(self.low.get(self.document_index[i], offset=offset, length=length))
        text = numpy.concatenate(parts).astype(numpy.int64)
        assert len(text) == self.seq_length + 1
        return text


class BlendedDataset:
    def __init__(self, datasets, weights, size):
        weights = normalize(weights)
        self.datasets = datasets
        if size is not None:
            self.dataset_index, self.dataset_sample_index = build_blending_indices(weights, size)
        else:
            self.dataset_index, self.dataset_sample_index = build_exhaustive_blending_indices(
                [len(d) for d in datasets])
        self.size = len(self.dataset_index)
        assert self.size == 0 or self.dataset_sample_index.max() < max(len(d) for d in datasets)

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        return self.datasets[self.dataset_index[idx]][self.dataset_sample_index[idx]]


# ---------------------------------------------------------------- builder


def size_per_split_per_dataset(weights, sizes, surplus=0.0):
    return [[int(math.ceil(math.ceil(t * w) * (1 + surplus))) for t in sizes] for w in weights]


def build_splits(low, matrix, sizes, seq_length, seed):
    n = len(low.sequence_lengths)
    out = []
    for i in range(3):
        if matrix[i] is None:
            out.append(None)
            continue
        beg = int(round(matrix[i][0] * float(n)))
        end = int(round(matrix[i][1] * float(n)))
        indices = numpy.arange(start=beg, stop=end, step=1, dtype=numpy.int32)
        out.append(GPTDataset(low, indices, sizes[i], seq_length, seed))
    return out


def build_blend(lows, weights, matrix, sizes, seq_length, seed, surplus, only=None):
    if weights is not None:
        weights = normalize(weights)
    if len(lows) == 1 and (weights is None or only is not None):
        return build_splits(lows[0], matrix, sizes, seq_length, seed)
    if weights is None:
        buffer = [[None] * 3 for _ in lows]
    else:
        target = size_per_split_per_dataset(weights, sizes)
        buffer = size_per_split_per_dataset(weights, sizes, surplus)
    mids = [build_splits(low, matrix, buffer[j], seq_length, seed) for j, low in enumerate(lows)]
    out = [None] * 3
    for i in range(3):
        if matrix[i] is None:
            continue
        ds_i = [m[i] for m in mids]
        if weights is not None:
            size_i = sum(target[j][i] for j in range(len(lows)))
            weights_i = weights
        else:
            weights_i = [len(d) for d in ds_i]
            size_i = min(sizes[i], sum(weights_i)) if sizes[i] is not None else None
        out[i] = BlendedDataset(ds_i, weights_i, size_i)
    return out


def make_low(spec):
    if "prefix" in spec:
        return IdxLowLevel(spec["prefix"])
    return SyntheticLowLevel(spec["sizes"], spec["id"])


def build_mode(cfg):
    """cfg: seq_length, seed, sizes [3] (null allowed), surplus, max_samples (per split,
    how many samples' tokens to return), and one of:
      "mock": eod [, "vocab_size": V]              -> MockGPTDataset, split "1,1,1"
      "blend": {"datasets": [...], "weights": [...]|null}, "split": "..."
      "blend_per_split": [blend|null] * 3
    Returns per split null or {"size", "samples": [[tokens]...], and for plain GPT
    datasets "document_index", "sample_index", "shuffle_index", "num_epochs",
    "separate_final_epoch"; for blends "dataset_index", "dataset_sample_index"}."""
    seq, seed, sizes = cfg["seq_length"], cfg["seed"], cfg["sizes"]
    surplus = cfg.get("surplus", 0.005)
    if cfg.get("mock") is not None:
        low = MockLowLevel(cfg["mock"], cfg.get("vocab_size"))
        result = build_splits(low, parse_split_matrix("1,1,1"), sizes, seq, seed)
    elif cfg.get("blend") is not None:
        blend = cfg["blend"]
        lows = [make_low(s) for s in blend["datasets"]]
        result = build_blend(lows, blend["weights"], parse_split_matrix(cfg["split"]), sizes,
                             seq, seed, surplus)
    else:
        result = [None] * 3
        for i, blend in enumerate(cfg["blend_per_split"]):
            if blend is None:
                continue
            matrix = [None] * 3
            matrix[i] = (0.0, 1.0)
            sizes_spoof = [0] * 3
            sizes_spoof[i] = sizes[i]
            lows = [make_low(s) for s in blend["datasets"]]
            result[i] = build_blend(lows, blend["weights"], matrix, sizes_spoof, seq, seed,
                                    surplus, only=i)[i]
    out = []
    for i, ds in enumerate(result):
        if ds is None:
            out.append(None)
            continue
        limit = min(len(ds), cfg["max_samples"][i])
        entry = {"size": len(ds), "samples": [[int(t) for t in ds[k]] for k in range(limit)]}
        if isinstance(ds, GPTDataset):
            entry.update({
                "document_index": ds.document_index.tolist(),
                "sample_index": ds.sample_index.reshape(-1).tolist(),
                "shuffle_index": [int(v) for v in ds.shuffle_index],
                "num_epochs": ds.num_epochs,
                "separate_final_epoch": bool(ds.separate_final_epoch),
            })
        else:
            entry.update({
                "dataset_index": ds.dataset_index.tolist(),
                "dataset_sample_index": ds.dataset_sample_index.tolist(),
            })
        out.append(entry)
    return out


# ---------------------------------------------------------------- masks


def get_ltor_masks_and_position_ids(data, eod_token, reset_position_ids,
                                    reset_attention_mask, eod_mask_loss):
    """gpt_dataset.py _get_ltor_masks_and_position_ids on one sample [s] (numpy), plus
    the attention mask turned into doc_start: for query i, the first key it may see."""
    seq_length = data.shape[0]
    loss_mask = numpy.ones(seq_length, dtype=numpy.float32)
    if eod_mask_loss:
        loss_mask[data == eod_token] = 0.0
    position_ids = numpy.arange(seq_length, dtype=numpy.int64)
    attention = numpy.tril(numpy.ones((seq_length, seq_length), dtype=numpy.int8))
    if reset_position_ids or reset_attention_mask:
        eod_index = position_ids[data == eod_token].copy()
        prev_index = 0
        for j in range(eod_index.shape[0]):
            i = eod_index[j]
            if reset_attention_mask:
                attention[(i + 1):, :(i + 1)] = 0
            if reset_position_ids:
                position_ids[(i + 1):] -= i + 1 - prev_index
                prev_index = i + 1
    doc_start = numpy.argmax(attention > 0, axis=1).astype(numpy.int64)
    return loss_mask, position_ids, doc_start


def masks_mode(cfg):
    """cfg: tokens [[s+1]...] (b samples), eod, eod_mask_loss, reset_position_ids,
    reset_attention_mask. Returns {tokens, labels, loss_mask, position_ids, doc_start}
    flattened [b*s], as pretrain_gpt get_batch + GPTDataset.__getitem__ build them."""
    out = {"tokens": [], "labels": [], "loss_mask": [], "position_ids": [], "doc_start": []}
    for sample in cfg["samples"]:
        text = numpy.array(sample, dtype=numpy.int64)
        tokens, labels = text[:-1], text[1:]
        loss_mask, position_ids, doc_start = get_ltor_masks_and_position_ids(
            tokens, cfg["eod"], cfg["reset_position_ids"], cfg["reset_attention_mask"],
            cfg["eod_mask_loss"])
        out["tokens"] += tokens.tolist()
        out["labels"] += labels.tolist()
        out["loss_mask"] += loss_mask.tolist()
        out["position_ids"] += position_ids.tolist()
        out["doc_start"] += doc_start.tolist()
    return out


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    if cfg["mode"] == "build":
        result = build_mode(cfg)
    elif cfg["mode"] == "masks":
        result = masks_mode(cfg)
    else:
        raise ValueError(cfg["mode"])
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
