#!/usr/bin/python3
"""Compares token ids of //data:gpt2_bpe_tokenizer with the references.

  compare.py classes CPP_CLASSES NODE_CLASSES DISAGREE_OUT
      Checks that the C++ class table (tokenize_tool --dump-classes) equals Python
      `regex`'s \\p{L} / \\p{N} / \\s for every code point (must be exact), and
      writes the code points where node's classes differ from Python's (expected:
      Unicode 15.0 vs node's newer version, and JavaScript's \\s) to DISAGREE_OUT.
  compare.py ids NAME INPUTS CPP REF [DISAGREE]
      Checks that CPP and REF hold the same ids line by line. With DISAGREE, lines
      whose input contains one of those code points are skipped (counted).
"""
import json
import sys

import regex


def read_ranges(path):
    classes = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            lo, hi, k = line.split()
            for cp in range(int(lo, 16), int(hi, 16) + 1):
                classes[cp] = int(k)
    return classes


def python_classes():
    letter, number, space = regex.compile(r"\p{L}"), regex.compile(r"\p{N}"), regex.compile(r"\s")
    classes = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        k = 1 if letter.match(c) else 2 if number.match(c) else 3 if space.match(c) else 0
        if k:
            classes[cp] = k
    return classes


def compare_classes(cpp_path, node_path, disagree_path):
    py = python_classes()
    cpp = read_ranges(cpp_path)
    if cpp != py:
        bad = sorted(set(cpp.items()) ^ set(py.items()))[:10]
        sys.exit("FAIL: C++ class table differs from Python regex at %s" %
                 ", ".join("U+%04X class %d" % b for b in bad))
    node = read_ranges(node_path)
    disagree = sorted(cp for cp in set(py) | set(node) if py.get(cp, 0) != node.get(cp, 0))
    with open(disagree_path, "w") as f:
        json.dump(disagree, f)
    ws = [cp for cp in disagree if 3 in (py.get(cp, 0), node.get(cp, 0))]
    print("classes: C++ table == Python regex for all %d classified code points; "
          "node differs on %d code points (whitespace: %s)" %
          (len(py), len(disagree), ", ".join("U+%04X" % cp for cp in ws)))


def compare_ids(name, inputs_path, cpp_path, ref_path, disagree_path=None):
    disagree = set()
    if disagree_path:
        with open(disagree_path) as f:
            disagree = set(json.load(f))
    with open(inputs_path, encoding="utf-8") as f:
        inputs = [json.loads(line) for line in f]
    with open(cpp_path) as f:
        cpp = [json.loads(line) for line in f]
    with open(ref_path) as f:
        ref = [json.loads(line) for line in f]
    if not len(inputs) == len(cpp) == len(ref):
        sys.exit("FAIL %s: %d inputs, %d C++ lines, %d reference lines" %
                 (name, len(inputs), len(cpp), len(ref)))
    compared = skipped = tokens = 0
    for i, (text, a, b) in enumerate(zip(inputs, cpp, ref)):
        if disagree and any(ord(c) in disagree for c in text):
            skipped += 1
            continue
        compared += 1
        tokens += len(b)
        if a != b:
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            shown = text if len(text) <= 400 else text[:400] + "... (%d chars)" % len(text)
            sys.exit("FAIL %s: line %d differs at token %d\n input: %r\n C++:  %s\n ref:  %s" %
                     (name, i + 1, k, shown, a[max(0, k - 3):k + 5], b[max(0, k - 3):k + 5]))
    print("%s: %d strings identical (%d tokens), %d skipped" % (name, compared, tokens, skipped))
    if compared == 0:
        sys.exit("FAIL %s: nothing compared" % name)


def main():
    if sys.argv[1] == "classes":
        compare_classes(*sys.argv[2:5])
    elif sys.argv[1] == "ids":
        compare_ids(*sys.argv[2:])
    else:
        sys.exit("usage: compare.py classes|ids ...")


if __name__ == "__main__":
    main()
