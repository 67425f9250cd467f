"""Checks --metrics-jsonl and `mxmaca plot`'s SVG, for //tests/integration:metrics_test.

  check_metrics_files.py jsonl LOG METRICS.jsonl
      one "train" object per log line with the line's numbers (to the printed precision),
      one "validation" object per validation block, in the log's order.
  check_metrics_files.py svg METRICS.jsonl OUT.svg
      the SVG parses as XML (python3's xml.etree); three panels; in each, the axis map read
      back from the tick labels (value) and their positions takes every polyline point to
      the metrics file's (iteration, value) pairs.
"""
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def close(a, b, rel=0.0, abs_=0.0):
    return abs(a - b) <= abs_ + rel * abs(b)


def check_jsonl(log, path):
    objects = load(path)
    train = [o for o in objects if o["type"] == "train"]
    valid = [o for o in objects if o["type"] == "validation"]
    lines = []
    vals = []
    with open(log) as f:
        for line in f:
            if re.search(r"iteration\s+\d+/\s*\d+ \|", line) and "lm loss:" in line:
                lines.append(dict(re.findall(r" ([a-zA-Z/() ]+?): ([^|]+?) \|", line)))
                lines[-1]["iteration"] = int(re.search(r"iteration\s+(\d+)/", line).group(1))
            m = re.search(r"validation loss at (.+?) \| lm loss value: ([^ ]+) \| lm loss PPL: ([^ ]+)", line)
            if m:
                vals.append((m.group(1), float(m.group(2)), float(m.group(3))))
    assert len(train) == len(lines) > 0, (len(train), len(lines))
    for o, l in zip(train, lines):
        assert o["iteration"] == l["iteration"], (o, l)
        assert o["consumed_samples"] == int(l["consumed samples"])
        assert o["global_batch_size"] == int(l["global batch size"])
        assert close(o["lm_loss"], float(l["lm loss"]), rel=5.1e-7), (o["lm_loss"], l["lm loss"])
        assert close(o["learning_rate"], float(l["learning rate"]), rel=5.1e-7, abs_=1e-300)
        assert close(o["grad_norm"], float(l["grad norm"]), abs_=5.1e-4)
        assert close(o["elapsed_ms_per_iteration"], float(l["elapsed time per iteration (ms)"]), abs_=0.051)
        assert close(o["tokens_per_second"], float(l["tokens/s"]), abs_=0.51)
        assert close(o["tflops_per_device"], float(l["throughput per GPU (TFLOP/s/GPU)"]), abs_=0.051)
        assert o["skipped_iterations"] == int(l["number of skipped iterations"])
        bubbles = re.findall(r"([0-9.]+)%", l.get("bubble per stage", ""))
        if bubbles:
            assert len(o["stage_bubble_fraction"]) == len(bubbles)
            for b, p in zip(o["stage_bubble_fraction"], bubbles):
                assert close(100 * b, float(p), abs_=0.051), (b, p)
            mean = sum(o["stage_bubble_fraction"]) / len(bubbles)
            assert close(o["bubble_percent"], 100 * mean, rel=1e-12)
            assert len(o["stage_busy_ms"]) == len(bubbles)
    assert len(valid) == len(vals), (len(valid), len(vals))
    for o, (where, loss, ppl) in zip(valid, vals):
        assert o["where"] == where and close(o["lm_loss"], loss, rel=5.1e-7), (o, where, loss)
        assert close(o["lm_loss_ppl"], ppl, rel=5.1e-7)
    print("ok   %s: %d train and %d validation objects match the log" % (path, len(train), len(valid)))


def numbers(text):
    return [float(v) for v in text.replace(",", " ").split()]


def check_svg(jsonl, svg_path):
    objects = load(jsonl)
    train = [o for o in objects if o["type"] == "train"]
    valid = [o for o in objects if o["type"] == "validation"]
    expected = {
        "loss": {"lm_loss": [(o["iteration"], o["lm_loss"]) for o in train if o.get("lm_loss") is not None],
                 "validation_lm_loss": [(o["iteration"], o["lm_loss"]) for o in valid]},
        "throughput": {"tokens_per_second": [(o["iteration"], o["tokens_per_second"]) for o in train]},
        "bubble": {"bubble_percent": [(o["iteration"], o["bubble_percent"]) for o in train
                                      if o.get("bubble_percent") is not None]},
    }
    root = ET.parse(svg_path).getroot()
    assert root.tag == SVG + "svg", root.tag
    panels = {g.get("id"): g for g in root.iter(SVG + "g") if g.get("class") == "panel"}
    assert sorted(panels) == ["bubble", "loss", "throughput"], sorted(panels)
    checked = 0
    for pid, series in expected.items():
        g = panels[pid]
        texts = list(g.iter(SVG + "text"))
        if not any(series.values()):  # e.g. no bubble with one pipeline stage
            assert not list(g.iter(SVG + "polyline")), pid
            assert any("no " in (t.text or "") for t in texts), pid
            continue
        xt = [(float(t.text), float(t.get("x"))) for t in texts if t.get("class") == "xtick"]
        yt = [(float(t.text), float(t.get("y"))) for t in texts if t.get("class") == "ytick"]
        assert len(xt) >= 2 and len(yt) >= 2, (pid, xt, yt)
        assert any(t.get("class") == "xlabel" and t.text == "iteration" for t in texts), pid
        assert any(t.get("class") == "ylabel" and t.text for t in texts), pid
        # Ticks evenly spaced and increasing (x rightwards, y upwards).
        for ticks, sign in ((xt, 1), (yt, -1)):
            steps = [b[1] - a[1] for a, b in zip(ticks, ticks[1:])]
            assert all(sign * s > 0 for s in steps), (pid, ticks)
            assert max(steps) - min(steps) < 0.02 * abs(steps[0]) + 0.02, (pid, ticks)
        (v0, x0), (v1, x1) = xt[0], xt[-1]
        (w0, y0), (w1, y1) = yt[0], yt[-1]
        lines = {p.get("data-series"): p for p in g.iter(SVG + "polyline")}
        for name, data in series.items():
            if not data:
                assert name not in lines, (pid, name)
                continue
            pts = numbers(lines[name].get("points"))
            pts = list(zip(pts[0::2], pts[1::2]))
            assert len(pts) == len(data), (pid, name, len(pts), len(data))
            for (px, py), (it, value) in zip(pts, data):
                x = v0 + (px - x0) / (x1 - x0) * (v1 - v0)
                y = w0 + (py - y0) / (y1 - y0) * (w1 - w0)
                # 2-decimal coordinates: 0.01 unit of the axis span per pixel.
                assert close(x, it, abs_=0.01 * abs(v1 - v0) / abs(x1 - x0) + 1e-9), (pid, name, x, it)
                assert close(y, value, abs_=0.01 * abs(w1 - w0) / abs(y1 - y0) + 1e-9), (pid, name, y, value)
                assert min(v0, v1) <= it <= max(v0, v1) and min(w0, w1) <= value <= max(w0, w1)
                checked += 1
    assert checked > 0
    print("ok   %s: 3 panels, %d polyline points match %s through the axes' ticks" % (svg_path, checked, jsonl))


if __name__ == "__main__":
    if sys.argv[1] == "jsonl":
        check_jsonl(sys.argv[2], sys.argv[3])
    else:
        check_svg(sys.argv[2], sys.argv[3])
