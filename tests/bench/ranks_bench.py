"""One training run of splitseg-cli, over 2 local ranks (launch) or in one process; prints one JSON
line: the wall time of every step after the warm-up, the bytes the ranks moved per step and the
last step's per-rank split of the time. Used by tests/bench/run.sh (issue 13's benchmark)."""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--cli", required=True)
ap.add_argument("--ranks", type=int, default=2)  # 0: one process
ap.add_argument("--micro", type=int, default=1)
ap.add_argument("--threads", type=int, default=1)  # per process
ap.add_argument("--size", type=int, default=64)
ap.add_argument("--base", type=int, default=16)
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--placement", default="")
a = ap.parse_args()

flags = ["--synthetic", str(a.size), "--patch", str(a.size), "--base", str(a.base), "--norm", "none", "--batch", str(a.batch),
         "--steps", str(a.steps + a.warmup), "--seed", "1", "--progress", "jsonl"]
if a.ranks > 0:
    cmd = [a.cli, "launch", "--local-ranks", str(a.ranks), "--rank-timeout", "600", "train", *flags,
           "--micro-batches", str(a.micro), "--placement", a.placement]
else:
    # One process; a placement here may shard stages (devices standing in through SPLITSEG_STAND_INS).
    cmd = [a.cli, "train", *flags] + (["--placement", a.placement] if a.placement else [])
env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
p = subprocess.run(cmd, env=env, capture_output=True, text=True)
if p.returncode != 0:
    sys.stderr.write(p.stderr[-2000:])
    sys.exit(1)
steps = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{") and '"loss"' in l]
timed = steps[a.warmup:]
ranks = timed[-1].get("ranks") or []
print(json.dumps({"ranks_count": a.ranks, "micro_batches": a.micro, "threads_per_process": a.threads,
                  "size": a.size, "base": a.base, "batch": a.batch, "placement": a.placement,
                  "steps": [s["seconds"] for s in timed],
                  "bytes_per_step": sum(r["bytes_sent"] for r in ranks),
                  "per_rank": ranks}))
