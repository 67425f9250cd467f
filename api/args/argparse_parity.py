"""argparse reference for //api/args:argparse_parity_test.

Builds an argparse.ArgumentParser (allow_abbrev=False, as Megatron's parse_args) from
the flag table that the C++ test dumps as JSON (option strings, dest, action, nargs,
type, choices), parses every command line of the input, and writes, per case, whether
argparse accepted it and repr() of every dest in the resulting namespace.

usage: argparse_parity.py IN.json OUT.json
Imports nothing from Megatron: the flags come from MXMACA's table.
"""
import argparse
import json
import sys


class ParseError(Exception):
    pass


def build_parser(flags):
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)

    def fail(message):
        raise ParseError(message)

    parser.error = fail
    types = {"int": int, "float": float, "bool": bool}
    for flag in flags:
        kwargs = {"dest": flag["dest"]}
        action = flag["action"]
        if action == "store_true":
            kwargs["action"] = "store_true"
        elif action == "store_false":
            kwargs["action"] = "store_false"
        elif action == "BooleanOptional":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            value_type = types.get(flag["type"], str)
            kwargs["type"] = value_type
            if flag["nargs"]:
                n = flag["nargs"]
                kwargs["nargs"] = int(n) if n.isdigit() else n
            if flag["choices"]:
                kwargs["choices"] = [value_type(c) for c in flag["choices"]]
        parser.add_argument(*flag["options"], **kwargs)
    return parser


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    parser = build_parser(spec["flags"])
    results = []
    for argv in spec["cases"]:
        try:
            namespace = parser.parse_args(argv)
        except ParseError as e:
            results.append({"ok": False, "error": str(e)})
            continue
        results.append({"ok": True, "values": {k: repr(v) for k, v in vars(namespace).items()}})
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
