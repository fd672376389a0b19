"""Today's planner on the GPU kit's measured runs: tests/gpu/replan.py CLI [GPU_JSON] [OUT]

For every single-device run, every largest-cube row and every CUDA inference row in docs/bench/gpu.json, asks `splitseg-cli
plan` (this checkout's build, a planning-only cuda:0) what it predicts now, the way the kit asked
on the lease (tensors + the workspace measured there; for the largest cube, the cap and that
workspace as the allowance). Writes docs/bench/gpu/replan.jsonl, which the report shows beside
the lease's own predictions. Rerun after a planner change (LeasePeaksTest checks the same runs).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def plan(cli, *args):
    out = subprocess.run([cli, "plan", "--base", "32", "--json", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # {"plan": ..., "largest": ... with --largest}


def mode_flags(mode):
    # MODE or MODE@NORM (tests/gpu/run.sh's size_runs); the kit's other runs have no norm layers.
    base, _, norm = mode.partition("@")
    base = base.split(":")[0]  # "bf16+recompute:expandable": an allocator setting the planner does not see
    return ["--precision", base.split("+")[0], "--checkpoint", "all" if base == "bf16+recompute" else "none",
            "--norm", norm or "none"]


def main():
    cli = sys.argv[1]
    gpu = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs/bench/gpu.json"
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT / "docs/bench/gpu/replan.jsonl"
    g = json.loads(gpu.read_text())
    ws = (g.get("allowance") or {}).get("workspace") or 0
    rows = []
    for r in g.get("runs") or []:
        if r.get("placement") != "single":
            continue
        d = plan(cli, "--size", str(r["size"]), "--devices", "cuda:0=141GiB", *mode_flags(r["mode"]))["plan"]["devices"][0]
        rows.append({"kind": "run", "size": r["size"], "mode": r["mode"],
                     "predicted_peak": d["peak"] - d["allowance"] + ws})
    cap = g.get("fraction_gib") or 16
    for mode in (g.get("largest") or {}):
        p = plan(cli, "--size", "64", "--devices", f"cuda:0={cap:g}GiB", "--allowance", f"{ws}B", "--largest",
                 *mode_flags(mode))
        rows.append({"kind": "largest", "mode": mode, "predicted": (p.get("largest") or {}).get("edge")})
    # `infer --synthetic`'s network (tests/gpu/run.sh, step 7): base 32, no norm, 2 classes, fp32.
    for r in g.get("inference_memory") or []:
        if r.get("device", "").startswith("cuda") and r.get("measured"):
            d = plan(cli, "--inference", "--volume", str(r["size"]), "--window", str(r["window"]),
                     "--windows-per-pass", str(r["per_pass"]), "--devices", "cuda:0=141GiB", "--norm", "none",
                     "--out-channels", "2")["plan"]["devices"][0]
            rows.append({"kind": "infer", "tag": r["tag"], "predicted": d["peak"] - d["allowance"]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"replan: {len(rows)} rows -> {out}")


if __name__ == "__main__":
    main()
