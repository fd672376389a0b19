"""Reads a command's stdout (one JSON line, or one pretty-printed JSON document as `plan --json`
prints) and writes it back as one line with tags added: `tag_json.py KEY VALUE [KEY VALUE ...]`.
A value that is a whole number is stored as a number."""
import json
import sys

text = sys.stdin.read().strip()
try:
    doc = json.loads(text)
except json.JSONDecodeError:
    doc = json.loads(text.splitlines()[-1])  # progress lines before the final JSON line
args = sys.argv[1:]
for key, value in zip(args[0::2], args[1::2]):
    doc[key] = int(value) if value.lstrip("-").isdigit() else value
print(json.dumps(doc))
