#!/usr/bin/python3
"""Writes the King James Bible as JSONL for `mxmaca preprocess`: one document per chapter.

Reads `bible -f "Gen1:1-Rev22:21"` (Debian package bible-kjv), which prints one verse
per line as "<Book><chapter>:<verse> <text>", e.g. "Ge1:1 In the beginning God ...".
Each chapter (1,189 of them) becomes one line {"text": "<verse 1>\\n<verse 2>\\n..."}:
the verse texts without their "Ge1:1 " reference, joined by "\\n" (no trailing newline).
Chapters are in Bible order; the output is deterministic (json.dumps with
ensure_ascii=True, "\\n" line endings).

Usage: /usr/bin/python3 tools/kjv_to_jsonl.py OUT.jsonl   (or "-" for stdout)
"""
import json
import subprocess
import sys

EXPECTED_CHAPTERS = 1189
EXPECTED_VERSES = 31102


def chapters(lines):
    """Yields (chapter reference, [verse texts]) in order, e.g. ("Ge1", [...])."""
    current, verses = None, []
    for number, line in enumerate(lines, start=1):
        ref, sep, text = line.partition(" ")
        if not sep or ":" not in ref:
            raise ValueError("bible output line %d: expected '<Book><chapter>:<verse> "
                             "<text>', got %r" % (number, line[:80]))
        chapter = ref.split(":", 1)[0]
        if chapter != current:
            if current is not None:
                yield current, verses
            current, verses = chapter, []
        verses.append(text)
    if current is not None:
        yield current, verses


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                         stdout=subprocess.PIPE).stdout.decode("utf-8")
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != EXPECTED_VERSES:
        sys.exit("bible printed %d verses, expected %d" % (len(lines), EXPECTED_VERSES))
    docs = [json.dumps({"text": "\n".join(verses)}) for _, verses in chapters(lines)]
    if len(docs) != EXPECTED_CHAPTERS:
        sys.exit("found %d chapters, expected %d" % (len(docs), EXPECTED_CHAPTERS))
    data = "".join(doc + "\n" for doc in docs)
    if sys.argv[1] == "-":
        sys.stdout.write(data)
    else:
        with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
            f.write(data)


if __name__ == "__main__":
    main()
