"""Independent reader of a TensorBoard event file, for //tests/integration:metrics_test.

Decodes the file with Debian's python3-protobuf: the message classes come from
tensorboard_event.proto (TensorFlow's Event/Summary fields), compiled by protoc into a
descriptor set at test time. The TFRecord framing and its masked CRC-32C are checked with
a bitwise CRC-32C written here. Then compares the scalars with the log lines of the same
run (the log's printed precision is the tolerance).

usage: read_tensorboard.py PROTO EVENT_DIR LOG EXPECTATIONS_JSON
EXPECTATIONS_JSON: {"tags": [...] (exact set), "tb_interval": N, "world_size": W,
                    "first_iteration": F, "same_clock": false when the log comes from
                    another process (timings then not compared), "text": {arg: str(value)}
                    (some of the args written as text summaries, at step F - 1)}
"""
import glob
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class(proto):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "event.desc")
        subprocess.run(["protoc", "--proto_path=" + os.path.dirname(proto),
                        "--descriptor_set_out=" + out, os.path.basename(proto)], check=True)
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tensorflow.Event"))


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    records, at = [], 0
    while at < len(data):
        assert at + 12 <= len(data), "truncated record header at byte %d" % at
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked(crc32c(header)), "bad length CRC at byte %d" % at
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert body_crc == masked(crc32c(body)), "bad data CRC at byte %d" % at
        records.append(body)
        at += 16 + length
    return records


NUM = r"([-+0-9.naifE]+)"


def parse_log(path):
    train, valid = {}, []
    with open(path) as f:
        for line in f:
            m = re.search(r"iteration\s+(\d+)/\s*\d+ \|", line)
            if m and "lm loss:" in line:
                fields = dict(re.findall(r" ([a-zA-Z/() ]+?): ([^|]+?) \|", line))
                train[int(m.group(1))] = fields
            m = re.search(r"validation loss at iteration (\d+).*lm loss value: " + NUM +
                          r" \| lm loss PPL: " + NUM, line)
            if m:
                valid.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    return train, valid


def close(a, b, rel=0.0, abs_=0.0):
    return abs(a - b) <= abs_ + rel * abs(b)


def main():
    proto, event_dir, log, expect_path = sys.argv[1:5]
    with open(expect_path) as f:
        expect = json.load(f)
    files = glob.glob(os.path.join(event_dir, "events.out.tfevents.*"))
    assert len(files) == 1, "expected one event file in %s, found %s" % (event_dir, files)
    name = os.path.basename(files[0])
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)", name)
    assert m, "file name %s is not SummaryWriter's" % name
    assert m.group(2) == socket.gethostname(), (m.group(2), socket.gethostname())
    Event = event_class(proto)
    events = [Event.FromString(r) for r in read_records(files[0])]
    assert events[0].WhichOneof("what") == "file_version", events[0]
    assert events[0].file_version == "brain.Event:2", events[0].file_version
    scalars, texts = {}, {}
    for e in events[1:]:
        assert e.WhichOneof("what") == "summary", e
        assert len(e.summary.value) == 1
        v = e.summary.value[0]
        assert abs(e.wall_time - int(m.group(1))) < 3600, e.wall_time
        if v.WhichOneof("value") == "tensor":  # SummaryWriter.add_text
            assert v.metadata.plugin_data.plugin_name == "text", v
            assert v.tensor.dtype == Event.DESCRIPTOR.file.enum_types_by_name[
                "DataType"].values_by_name["DT_STRING"].number, v
            assert [d.size for d in v.tensor.tensor_shape.dim] == [1], v
            assert len(v.tensor.string_val) == 1 and v.tag.endswith("/text_summary"), v
            texts[v.tag[:-len("/text_summary")]] = (e.step, v.tensor.string_val[0].decode())
            continue
        assert v.WhichOneof("value") == "simple_value", v
        scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
    # Megatron's write_args_to_tensorboard: every arg as text, at the starting iteration.
    want_text = expect.get("text", {})
    assert len(texts) >= 100, "%d args as text" % len(texts)
    for name, value in want_text.items():
        assert texts.get(name) == (expect["first_iteration"] - 1, value), (name, texts.get(name), value)
    got_tags = sorted(scalars)
    assert got_tags == sorted(expect["tags"]), "tags %s, expected %s" % (got_tags, sorted(expect["tags"]))

    train, valid = parse_log(log)
    assert train, "no iteration lines in " + log
    interval = expect["tb_interval"]
    tb_iters = [i for i in sorted(train) if i % interval == 0]
    samples = {i: int(train[i]["consumed samples"]) for i in train}

    def check_series(tag, of_log, rel=0.0, abs_=0.0, iters=None):
        if tag not in scalars:
            return
        iters = tb_iters if iters is None else iters
        series = scalars[tag]
        assert [s for s, _ in series] == iters, "%s steps %s, expected %s" % (
            tag, [s for s, _ in series], iters)
        for (step, value), it in zip(series, iters):
            want = of_log(it)
            assert close(value, want, rel, abs_), "%s at %d: %r, log %r" % (tag, step, value, want)
        twin = tag + " vs samples"
        if twin in scalars:
            assert [s for s, _ in scalars[twin]] == [samples[i] for i in iters], twin
            assert [v for _, v in scalars[twin]] == [v for _, v in series], twin

    # Printed %.6E (7 significant digits) against a float32: 1e-6 relative.
    check_series("lm loss", lambda i: float(train[i]["lm loss"]), rel=1e-6)
    check_series("learning-rate", lambda i: float(train[i]["learning rate"]), rel=1e-6)
    check_series("grad-norm", lambda i: float(train[i]["grad norm"]), rel=1e-6, abs_=5.1e-4)
    check_series("num-zeros", lambda i: float(train[i]["num zeros"]))
    check_series("params-norm", lambda i: float(train[i]["params norm"]), rel=1e-6, abs_=5.1e-4)
    check_series("loss-scale", lambda i: float(train[i]["loss scale"]), abs_=0.051)
    check_series("batch-size", lambda i: float(train[i]["global batch size"]))
    check_series("world-size", lambda i: float(expect["world_size"]))
    later = [i for i in sorted(train) if i != expect["first_iteration"]]
    # Timings are each process's own clock: in a launched job the last rank writes the
    # event file and rank 0 the log, so only their steps are compared there.
    timed = expect.get("same_clock", True)
    check_series("iteration-time",
                 lambda i: float(train[i]["elapsed time per iteration (ms)"]) / 1e3,
                 rel=1e-6, abs_=5.1e-5 if timed else math.inf, iters=later)
    check_series("throughput", lambda i: float(train[i]["throughput per GPU (TFLOP/s/GPU)"]),
                 rel=1e-6, abs_=0.051 if timed else math.inf, iters=sorted(train))
    check_series("mem-peak-activation-bytes",
                 lambda i: float(train[i]["peak activation memory (MB)"]) * 1048576.0,
                 rel=1e-6, abs_=0.051 * 1048576.0, iters=sorted(train))
    if "lm loss validation" in scalars:
        series = scalars["lm loss validation"]
        assert [s for s, _ in series] == [it for it, _, _ in valid], (series, valid)
        for (step, value), (_, loss, _) in zip(series, valid):
            assert close(value, loss, rel=1e-6), ("validation", step, value, loss)
    if "lm loss validation ppl" in scalars:
        for (step, value), (_, _, ppl) in zip(scalars["lm loss validation ppl"], valid):
            assert close(value, ppl, rel=1e-6), ("ppl", step, value, ppl)
    n = sum(len(s) for s in scalars.values())
    print("ok   %s: %d scalars under %d tags, CRCs and values match the log" % (name, n, len(scalars)))


if __name__ == "__main__":
    main()
