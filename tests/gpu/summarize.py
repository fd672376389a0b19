"""Folds tests/gpu/run.sh's JSON lines into gpu.json (read by tests/bench/report.py for
docs/benchmarks.md) and a short summary.txt, and prints the summary."""
import argparse
import datetime
import json
from pathlib import Path


def mib(v):
    return "n/a" if not v else f"{v / 2**20:.0f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", default="?")
    ap.add_argument("--cap-gib", type=float, default=16)
    ap.add_argument("--elapsed", type=int, default=0)
    a = ap.parse_args()
    rows = [json.loads(l) for l in Path(a.results).read_text().splitlines() if l.strip()]
    by_tag = {r.get("tag"): r for r in rows}

    def planned_peak(tag, device):
        plan = (by_tag.get(tag) or {}).get("plan") or {}
        for d in plan.get("devices", []):
            if d.get("name") == device:
                return d.get("peak")
        return None

    runs = []
    for r in rows:
        tag = r.get("tag", "")
        if not tag.startswith("train:"):
            continue
        _, size, mode, where = tag.split(":")
        peaks = r.get("peak_bytes") or {}
        dev = "cuda:0" if "cuda:0" in peaks else "cpu"
        runs.append({"size": int(size), "mode": mode, "placement": "split cuda:0/cpu" if where == "split" else "single",
                     "median_step_seconds": r.get("median_step_seconds"), "oom": bool(r.get("oom")),
                     "measured_peak": peaks.get(dev), "peak_bytes": peaks,
                     "predicted_peak": planned_peak(f"plan:{size}:{mode}", dev) if where == "one" else None,
                     "error": r.get("error")})
    largest = {}
    for m in ("bf16+recompute", "fp32"):
        meas = by_tag.get(f"largest:{m}") or {}
        plan = by_tag.get(f"plan_largest:{m}") or {}
        largest[m] = {"measured": meas.get("largest"), "predicted": (plan.get("largest") or {}).get("edge"),
                      "tried": meas.get("tried"), "error": meas.get("error") or plan.get("error")}
    single = {r["size"]: r["median_step_seconds"] for r in runs if r["mode"] == "fp32" and r["placement"] == "single"}
    split = {r["size"]: r["median_step_seconds"] for r in runs if r["placement"] != "single"}
    summary = {"gpu": a.gpu, "date": datetime.date.today().isoformat(), "fraction_gib": a.cap_gib,
               "elapsed_s": a.elapsed, "equivalence": by_tag.get("equivalence"), "runs": runs,
               "split_vs_single": {s: {"single": single.get(s), "split": split[s]} for s in split},
               "largest": largest}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(summary, indent=1))

    lines = [f"SplitSeg GPU checks on {a.gpu}, {summary['date']}, {a.elapsed} s"]
    eq = summary["equivalence"] or {}
    if eq:
        lines.append(f"split equivalence (probabilities, max abs diff): split vs cuda {eq.get('split_vs_gpu', 'n/a'):.2e}, "
                     f"split vs cpu {eq.get('split_vs_cpu', 'n/a'):.2e}, cuda vs cpu {eq.get('gpu_vs_cpu', 'n/a'):.2e}")
    lines.append(f"{'size':>5} {'mode':<15} {'placement':<17} {'step':>9} {'measured':>11} {'predicted':>11} {'error':>7}")
    for r in runs:
        err = (f"{(r['predicted_peak'] - r['measured_peak']) / r['measured_peak'] * 100:+.0f}%"
               if r["predicted_peak"] and r["measured_peak"] else "")
        step = "OOM" if r["oom"] else ("error" if r["error"] else f"{r['median_step_seconds']:.3f}s")
        lines.append(f"{r['size']:>5} {r['mode']:<15} {r['placement']:<17} {step:>9} {mib(r['measured_peak']):>11} "
                     f"{mib(r['predicted_peak']):>11} {err:>7}")
    for s, v in summary["split_vs_single"].items():
        if v["single"] and v["split"]:
            lines.append(f"split cost at {s}^3 fp32: {v['split'] / v['single'] - 1:+.0%} "
                         f"({v['split']:.3f}s vs {v['single']:.3f}s)")
    for m, v in largest.items():
        lines.append(f"largest cube within {a.cap_gib:g} GiB, {m}: measured {v['measured']}, planner {v['predicted']}"
                     + (f" ({v['error']})" if v.get("error") else ""))
    errors = [r for r in rows if r.get("error") and not r.get("oom")]
    for r in errors:
        lines.append(f"error in {r.get('tag')}: {str(r['error'])[:160]}")
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
