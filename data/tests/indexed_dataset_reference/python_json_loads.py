#!/usr/bin/python3
"""What Megatron's preprocess_data.py sees of each JSONL line: for every line of the
input file (split on b"\\n" only), decode it as strict UTF-8 and json.loads it, then
report as one JSON line (ASCII):
  {"ok": false}                                   decoding or json.loads failed
  {"ok": true, "object": false}                   valid JSON, not an object
  {"ok": true, "object": true, "has": false}      object without key KEY
  {"ok": true, "object": true, "has": true, "type": T, "strings": [...],
   "surrogate": bool}
T is nlohmann's type name of data[KEY]; "strings" holds the string or the array's
string elements; "surrogate" says whether one of them holds a lone surrogate (which
Megatron's tokenizer cannot encode).

Usage: python_json_loads.py INPUT KEY > OUTPUT
"""
import json
import sys


def type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def has_surrogate(s):
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def main():
    key = sys.argv[2]
    data = open(sys.argv[1], "rb").read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = sys.stdout
    for raw in lines:
        try:
            value = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            out.write('{"ok": false}\n')
            continue
        if not isinstance(value, dict):
            out.write('{"ok": true, "object": false}\n')
            continue
        if key not in value:
            out.write('{"ok": true, "object": true, "has": false}\n')
            continue
        v = value[key]
        strings = [v] if isinstance(v, str) else (
            [e for e in v if isinstance(e, str)] if isinstance(v, list) else [])
        surrogate = any(has_surrogate(s) for s in strings)
        if surrogate:
            strings = []
        out.write(json.dumps({"ok": True, "object": True, "has": True, "type": type_name(v),
                              "strings": strings, "surrogate": surrogate}) + "\n")


if __name__ == "__main__":
    main()
