"""One training run of splitseg-cli, over 2 local ranks (launch) or in one process; prints one JSON
line: the wall time of every step after the warm-up, the bytes the ranks moved per step and the
last step's per-rank split of the time. Used by tests/bench/run.sh (issue 13's benchmark).
With --infer: one sliding-window inference of a --size^3 phantom instead (untrained network from the
run's seed), its seconds as "steps" (one value)."""
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
ap.add_argument("--infer", action="store_true")
ap.add_argument("--window", type=int, default=64)
a = ap.parse_args()
env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))

if a.infer:
    # --batch windows per forward pass on both sides; over ranks as --micro micro-batches.
    flags = ["--synthetic", str(a.size), "--base", str(a.base), "--norm", "none", "--window", str(a.window),
             "--batch", str(a.batch), "--progress", "none"]
    if a.ranks > 0:
        cmd = [a.cli, "launch", "--local-ranks", str(a.ranks), "--rank-timeout", "600", "infer", *flags,
               "--micro-batches", str(a.micro), "--placement", a.placement]
    else:
        cmd = [a.cli, "infer", *flags]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
        sys.exit(1)
    out = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    print(json.dumps({"ranks_count": a.ranks, "micro_batches": a.micro, "threads_per_process": a.threads,
                      "size": a.size, "base": a.base, "batch": a.batch, "window": a.window,
                      "placement": a.placement, "steps": [out["seconds"]]}))
    sys.exit(0)

flags = ["--synthetic", str(a.size), "--patch", str(a.size), "--base", str(a.base), "--norm", "none", "--batch", str(a.batch),
         "--steps", str(a.steps + a.warmup), "--seed", "1", "--progress", "jsonl"]
if a.ranks > 0:
    cmd = [a.cli, "launch", "--local-ranks", str(a.ranks), "--rank-timeout", "600", "train", *flags,
           "--micro-batches", str(a.micro), "--placement", a.placement]
else:
    # One process; a placement here may shard stages (devices standing in through SPLITSEG_STAND_INS).
    cmd = [a.cli, "train", *flags] + (["--placement", a.placement] if a.placement else [])
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
