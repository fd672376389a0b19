"""merge_results.py OLD NEW: NEW's records, plus OLD's records of every kind NEW did not measure
(run.sh BENCH_ONLY + BENCH_MERGE: rerun some sections, keep the rest). Kinds are compared by their
section: every plan:* record of OLD goes when NEW has any plan:* record. NEW's machine record becomes a
machine_rerun record (with the kinds it measured) when OLD has one. Prints JSON lines."""
import json
import sys
from pathlib import Path


def family(kind):
    return kind.split(":", 1)[0] if kind.startswith("plan:") else kind


old = [json.loads(l) for l in Path(sys.argv[1]).read_text().splitlines() if l.strip()]
new = [json.loads(l) for l in Path(sys.argv[2]).read_text().splitlines() if l.strip()]
fresh = {family(r.get("kind", "")) for r in new}
# The report names the machine of the whole run (OLD's); NEW's machine is kept beside it as a
# rerun record naming the sections measured there, so no figure is attributed to the wrong CPU.
old_machine = any(r.get("kind") == "machine" for r in old)
if old_machine:
    fresh.discard("machine")
for r in old:
    if r.get("kind") == "machine_rerun":  # an earlier rerun keeps the kinds not measured again
        kept = [k for k in r.get("kinds", []) if k not in fresh]
        if kept:
            print(json.dumps(dict(r, kinds=kept)))
    elif family(r.get("kind", "")) not in fresh:
        print(json.dumps(r))
for r in new:
    if r.get("kind") == "machine" and old_machine:
        kinds = sorted({family(x.get("kind", "")) for x in new} - {"machine"})
        r = dict(r, kind="machine_rerun", kinds=kinds)
    print(json.dumps(r))
