"""merge_results.py OLD NEW: NEW's records, plus OLD's records of every kind NEW did not measure
(run.sh BENCH_ONLY + BENCH_MERGE: rerun some sections, keep the rest). Kinds are compared by their
section: every plan:* record of OLD goes when NEW has any plan:* record. Prints JSON lines."""
import json
import sys
from pathlib import Path


def family(kind):
    return kind.split(":", 1)[0] if kind.startswith("plan:") else kind


old = [json.loads(l) for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
new = [json.loads(l) for l in Path(sys.argv[2]).read_text().splitlines() if l.strip()]
fresh = {family(r.get("kind", "")) for r in new}
for r in old:
    if family(r.get("kind", "")) not in fresh:
        print(json.dumps(r))
for r in new:
    print(json.dumps(r))
