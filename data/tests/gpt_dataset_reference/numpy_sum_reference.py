"""numpy.sum and Megatron's utils.normalize of float64 lists, as float.hex strings.

usage: numpy_sum_reference.py IN.json OUT.json   (IN: a list of lists of floats)
"""
import json
import sys

import numpy


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    out = []
    for values in cases:
        w = numpy.array(values, dtype=numpy.float64)
        total = numpy.sum(w)
        out.append({"sum": float(total).hex(),
                    "normalized": [float(x).hex() for x in (w / total).tolist()]})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
