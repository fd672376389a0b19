"""Reads a command's stdout (one JSON line, or one pretty-printed JSON document as `plan --json`
prints) and writes it back as one line with a tag added: `tag_json.py KEY VALUE`."""
import json
import sys

text = sys.stdin.read().strip()
try:
    doc = json.loads(text)
except json.JSONDecodeError:
    doc = json.loads(text.splitlines()[-1])  # progress lines before the final JSON line
doc[sys.argv[1]] = sys.argv[2]
print(json.dumps(doc))
