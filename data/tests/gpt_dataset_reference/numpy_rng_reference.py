"""numpy reference for data/numpy_random_state_test.cc.

Reads a JSON list of cases from argv[1], writes a JSON list of results to argv[2].
Each case runs on a fresh generator; the result is the list of values produced (as
integers, or float.hex strings for doubles) so the C++ side can compare bit-exactly.

Case kinds:
  {"kind": "shuffle", "seed": s, "n": n, "dtype": "int32"|"uint32"|"int64", "times": t}
      RandomState(s); x = arange(n, dtype); shuffle(x) t times; result x (after each).
  {"kind": "permutation", "seed": s, "n": n}
  {"kind": "randint", "seed": s, "low": l, "high": h, "count": c}
      c separate scalar calls randint(l, h).
  {"kind": "random_sample", "seed": s, "count": c}
  {"kind": "default_rng_integers", "seed": s, "low": l, "high": h, "count": c}
      default_rng(s).integers(l, h, size=c, dtype=numpy.int32)
  {"kind": "default_rng_raw", "seed": s, "count": c}
      default_rng(s).bit_generator.random_raw(c)
"""
import json
import sys

import numpy


def run(case):
    kind = case["kind"]
    if kind == "shuffle":
        rs = numpy.random.RandomState(case["seed"])
        x = numpy.arange(case["n"], dtype=getattr(numpy, case["dtype"]))
        out = []
        for _ in range(case.get("times", 1)):
            rs.shuffle(x)
            out.extend(int(v) for v in x)
        return out
    if kind == "permutation":
        rs = numpy.random.RandomState(case["seed"])
        return [int(v) for v in rs.permutation(case["n"])]
    if kind == "randint":
        rs = numpy.random.RandomState(case["seed"])
        return [int(rs.randint(case["low"], case["high"])) for _ in range(case["count"])]
    if kind == "random_sample":
        rs = numpy.random.RandomState(case["seed"])
        return [float(rs.random_sample()).hex() for _ in range(case["count"])]
    if kind == "default_rng_integers":
        rng = numpy.random.default_rng(case["seed"])
        v = rng.integers(case["low"], case["high"], size=case["count"], dtype=numpy.int32)
        return [int(x) for x in v]
    if kind == "default_rng_raw":
        rng = numpy.random.default_rng(case["seed"])
        return [int(x) for x in rng.bit_generator.random_raw(case["count"])]
    raise ValueError("unknown case kind: %r" % kind)


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = [run(c) for c in cases]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
