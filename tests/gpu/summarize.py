"""Folds tests/gpu/run.sh's outputs (checks.jsonl, devices.json, results.jsonl) into gpu.json (read by
tests/bench/report.py for docs/benchmarks.md) and a short summary.txt, and prints the summary.

Memory is compared like with like. The caching allocator's peak counts tensors and the cuDNN
workspaces it hands out, never the CUDA context; the planner's device peak includes an allowance
(context + workspace). So: predicted allocator peak = planner peak - planner allowance (tensors)
+ the workspace measured at start-up, against the measured allocator peak."""
import argparse
import datetime
import json
from pathlib import Path


def mib(v):
    return "n/a" if not v else f"{v / 2**20:.0f} MiB"


def lines_of(path):
    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--checks", default="")
    ap.add_argument("--devices", default="")
    ap.add_argument("--peer", default="", help="tests/gpu/peer.sh's peer.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", default="none")
    ap.add_argument("--mode", default="gpu", choices=["gpu", "rehearse"])
    ap.add_argument("--cap-gib", type=float, default=16)
    ap.add_argument("--elapsed", type=int, default=0)
    a = ap.parse_args()
    rows = lines_of(a.results)
    checks = lines_of(a.checks) if a.checks else []
    devices = json.loads(Path(a.devices).read_text()) if a.devices and Path(a.devices).exists() else []
    by_tag = {r.get("tag"): r for r in rows}
    cuda = next((d for d in devices if d.get("name") == "cuda:0"), None)
    allowance = (cuda or {}).get("allowance") or {}
    workspace = allowance.get("workspace") if (allowance.get("workspace") or -1) >= 0 else None

    def planned(tag, device):
        plan = (by_tag.get(tag) or {}).get("plan") or {}
        for d in plan.get("devices", []):
            if d.get("name") == device:
                return d
        return None

    runs = []
    for r in rows:
        tag = r.get("tag", "")
        if not tag.startswith("train:"):
            continue
        _, size, mode, where = tag.split(":")
        peaks = r.get("peak_bytes") or {}
        dev = "cuda:0" if "cuda:0" in peaks else "cpu"
        plan = planned(f"plan:{size}:{mode}", dev) if where == "one" else None
        tensors = plan["peak"] - plan.get("allowance", 0) if plan else None
        # CUDA: the allocator also holds cuDNN workspaces; on the CPU there is no such allowance.
        predicted = None if tensors is None else tensors + ((workspace or 0) if dev != "cpu" else 0)
        runs.append({"size": int(size), "mode": mode, "placement": "split cuda:0/cpu" if where == "split" else "single",
                     "device": dev, "median_step_seconds": r.get("median_step_seconds"), "oom": bool(r.get("oom")),
                     "measured_peak": peaks.get(dev), "peak_bytes": peaks,
                     # What a memory cap bounds: allocated plus the caching allocator's free blocks.
                     "reserved_peak": (r.get("reserved_peak_bytes") or {}).get(dev),
                     "predicted_tensors": tensors, "predicted_peak": predicted,
                     "planner_device_peak": plan["peak"] if plan else None,
                     "planner_allowance": plan.get("allowance") if plan else None, "error": r.get("error")})
    largest = {}
    for m in ("bf16+recompute", "fp32", "bf16+recompute:expandable"):
        meas = by_tag.get(f"largest:{m}") or {}
        plan = by_tag.get(f"plan_largest:{m.split(':')[0]}") or {}  # the planner knows no allocator setting
        if meas or plan:
            largest[m] = {"measured": meas.get("largest"), "predicted": (plan.get("largest") or {}).get("edge"),
                          "tried": meas.get("tried"), "error": meas.get("error") or plan.get("error")}
    # Inference: `infer`'s planned and measured tensor peaks per device (the device running the
    # stages: cuda:0 when measured there, else the CPU, where the Inferer's host buffers count too).
    inference = []
    for r in rows:
        tag = str(r.get("tag", ""))
        if not tag.startswith("infer_plan:"):
            continue
        mem = r.get("memory") or {}
        plan, meas = mem.get("planned") or {}, mem.get("measured") or {}
        dev = "cuda:0" if "cuda:0" in meas else "cpu"
        p, m = plan.get(dev), meas.get(dev)
        _, size, window, per_pass = tag.split(":")
        inference.append({"tag": tag, "size": int(size), "window": int(window), "per_pass": int(per_pass), "device": dev,
                          "planned": p, "measured": m, "seconds": r.get("seconds"),
                          "error_pct": 100.0 * (p - m) / m if isinstance(p, (int, float)) and m else None,
                          "error": r.get("error") or plan.get("error")})
    single = {r["size"]: r["median_step_seconds"] for r in runs if r["mode"] == "fp32" and r["placement"] == "single"}
    split = {r["size"]: r["median_step_seconds"] for r in runs if r["placement"] != "single"}
    failed = [c for c in checks if c.get("status") == "fail"]
    summary = {"gpu": a.gpu, "mode": a.mode, "measured_on_gpu": a.mode == "gpu" and a.gpu != "none",
               "date": datetime.date.today().isoformat(), "fraction_gib": a.cap_gib, "elapsed_s": a.elapsed,
               "checks": checks, "checks_passed": bool(checks) and not failed,
               "devices": devices, "allowance": allowance,
               "equivalence": by_tag.get("equivalence"), "runs": runs,
               "split_vs_single": {s: {"single": single.get(s), "split": split[s]} for s in split},
               "largest": largest,
               "ranks": [r for r in rows if str(r.get("tag", "")).startswith("ranks:")],
               "ranks_infer": [r for r in rows if str(r.get("tag", "")).startswith("ranks_infer:")],
               "inference_memory": inference,
               "peak_snapshot": [r for r in rows if str(r.get("tag", "")).startswith("peak_snapshot:")],
               "peer": lines_of(a.peer) if a.peer else []}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(summary, indent=1))

    head = "REHEARSAL without a GPU (CPU, tiny sizes): nothing here is a GPU measurement" if a.mode == "rehearse" \
        else f"SplitSeg GPU checks on {a.gpu}"
    lines = [f"{head}, {summary['date']}, {a.elapsed} s"]
    for c in checks:
        lines.append(f"check {c.get('check'):<22} {c.get('status'):<5} {c.get('detail', '')[:120]}")
    if not checks:
        lines.append("no check results")
    if allowance:
        lines.append(f"cuda:0 allowance measured ({allowance.get('method')}): context {mib(allowance.get('context'))}, "
                     f"cuDNN workspace {mib(allowance.get('workspace'))}")
    for d in devices:
        for w in d.get("warnings", []):
            lines.append(f"warning {d.get('name')}: {w}")
    eq = summary["equivalence"] or {}
    if eq and "error" not in eq:
        lines.append(f"inference equivalence (probabilities, max abs diff): split vs one device {eq['split_vs_one']:.2e}, "
                     f"split vs cpu {eq['split_vs_cpu']:.2e}, one device vs cpu {eq['one_vs_cpu']:.2e}")
    lines.append(f"{'size':>5} {'mode':<24} {'placement':<17} {'step':>9} {'alloc peak':>11} {'predicted':>11} {'error':>7}")
    for r in runs:
        err = (f"{(r['predicted_peak'] - r['measured_peak']) / r['measured_peak'] * 100:+.0f}%"
               if r["predicted_peak"] and r["measured_peak"] else "")
        step = "OOM" if r["oom"] else ("error" if r["error"] else f"{r['median_step_seconds']:.3f}s")
        lines.append(f"{r['size']:>5} {r['mode']:<24} {r['placement']:<17} {step:>9} {mib(r['measured_peak']):>11} "
                     f"{mib(r['predicted_peak']):>11} {err:>7}")
    lines.append("(predicted = planner tensors + measured cuDNN workspace on CUDA; the context is outside both)")
    for s, v in summary["split_vs_single"].items():
        if v["single"] and v["split"]:
            lines.append(f"split cost at {s}^3 fp32: {v['split'] / v['single'] - 1:+.0%} ({v['split']:.3f}s vs {v['single']:.3f}s)")
    for m, v in largest.items():
        lines.append(f"largest cube within {a.cap_gib:g} GiB allocator cap, {m}: measured {v['measured']}, "
                     f"planner {v['predicted']}" + (f" ({v['error']})" if v.get("error") else ""))
    for r in summary["ranks"]:
        if "error" in r:
            lines.append(f"{r['tag']}: fail ({str(r['error'])[:160]})")
            continue
        first = (r.get("loss_diffs") or [float("nan")])[0]
        grad = (f"step-1 gradients vs one process {r['grad_rel_diff']:.1e} relative ({r['grad_worst_parameter']}; "
                f"bound {r['grad_bound']:.0e}), loss diffs max {r['loss_diff']:.1e} (bound {r['loss_bound']:.0e}), "
                if "grad_rel_diff" in r else f"bound {r.get('bound', float('nan')):.0e}, ")
        lines.append(f"{r['tag']}: {r.get('status', '?')}, {grad}weights after all steps max abs "
                     f"{r['max_weight_diff']:.2e} ({r.get('worst_parameter', '?')}"
                     + (f", {r['weights_over_bound']} over {r['bound']:.0e}" if "weights_over_bound" in r else "")
                     + f"), step-1 loss diff {first:.1e}, step {r['median_step_seconds']:.3f}s "
                     f"(one process {r['single_median_step_seconds']:.3f}s)")
    for r in summary["inference_memory"]:
        if r["error_pct"] is None:
            lines.append(f"{r['tag']}: no comparison ({str(r.get('error'))[:160]})")
            continue
        lines.append(f"{r['tag']} on {r['device']}: planned {mib(r['planned'])}, measured {mib(r['measured'])} "
                     f"({r['error_pct']:+.1f}%), {r['seconds']:.2f}s")
    for r in summary["peak_snapshot"]:
        if r.get("error"):
            continue
        top = ", ".join(f"{g['op']} {g['bytes'] / 2**20:.0f} MiB" for g in (r.get("groups") or [])[:4])
        lines.append(f"{r['tag']}: eager peak {r['peak_bytes'] / 2**20:.0f} MiB (before the step "
                     f"{r['baseline_bytes'] / 2**20:.0f} MiB); at the peak: {top}")
    peer = {r.get("kind"): r for r in summary["peer"]}
    for kind, r in peer.items():
        if kind.startswith("pytorch:") or r.get("error"):
            continue
        eager = (peer.get("pytorch:" + kind.split(":")[1]) or {}).get("median_step_seconds")
        if r.get("median_step_seconds") and eager:
            lines.append(f"{kind}: step {r['median_step_seconds']:.4f}s, PyTorch eager {eager:.4f}s, "
                         f"{r['median_step_seconds'] / eager:.2f}x")
        if r.get("timeline_parts"):
            lines.append(f"{kind}: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in r["timeline_parts"].items()))
    for r in list(rows) + summary["peer"]:
        if r.get("error") and not r.get("oom"):
            lines.append(f"error in {r.get('tag') or r.get('kind')}: {str(r['error'])[:160]}")
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
