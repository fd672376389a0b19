"""Turns tests/bench/run.sh's results (JSON lines) into one table, docs/benchmarks.md and plots.

Goals (issue 6): training step <= 0.9x PyTorch eager; split cost < 10%; inference >= 1.2x MONAI
throughput with max abs difference <= 1e-4. Hand-written findings live in tests/bench/analysis.md
and are appended verbatim, so rerunning the benchmarks never loses them.
"""
import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows


def pooled(rows, kind, key="steps"):
    """Median over every timed step of every round of one kind (None when it never ran)."""
    vals = [v for r in rows if r.get("kind") == kind and "error" not in r for v in r.get(key, [])]
    return statistics.median(vals) if vals else None


def first(rows, kind):
    for r in rows:
        if r.get("kind") == kind:
            return r
    return None


def fmt_s(v):
    return "n/a" if v is None else f"{v:.3f} s"


def mib(v):
    return "n/a" if v is None else f"{v / 2**20:.1f} MiB"


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def build(rows):
    """Returns (table rows [(benchmark, splitseg, peer, ratio, goal, verdict)], plot data, planner rows)."""
    table, plots = [], {}
    ss, pt = pooled(rows, "train_splitseg"), pooled(rows, "train_pytorch")
    split, plain = pooled(rows, "train_split"), pooled(rows, "train_plain")
    tr = first(rows, "train_splitseg") or {}
    size = "x".join(str(s) for s in tr.get("size", [])) or "?"
    fdiff = (first(rows, "train_pytorch") or {}).get("forward_max_abs_diff")
    label = f"training step, base {tr.get('base', '?')}, {size}, {tr.get('threads', '?')} threads"
    if ss and pt:
        ratio = ss / pt
        table.append((label, fmt_s(ss), f"{fmt_s(pt)} (PyTorch eager)", f"{ratio:.2f}x time", "<= 0.9x",
                      "met" if ratio <= 0.9 else "missed"))
    else:
        err = (first(rows, "train_splitseg") or first(rows, "train_pytorch") or {}).get("error", "did not run")
        table.append((label, fmt_s(ss), fmt_s(pt), "n/a", "<= 0.9x", f"not measured: {err}"))
    ssc, ptc = pooled(rows, "train_splitseg", "cpu_steps"), pooled(rows, "train_pytorch", "cpu_steps")
    splitc, plainc = pooled(rows, "train_split", "cpu_steps"), pooled(rows, "train_plain", "cpu_steps")
    if ssc and ptc:
        r = ssc / ptc
        table.append(("  same, process CPU time (robust to load)", fmt_s(ssc), fmt_s(ptc), f"{r:.2f}x time", "<= 0.9x",
                      "met" if r <= 0.9 else "missed"))
    if fdiff is not None:
        table.append(("  same network check: eval logits max abs diff", f"{fdiff:.2e}", "", "", "~1e-6", ""))
    if plain and pt:
        table.append(("  diagnostic: hand-written C++ loop (no Trainer)", fmt_s(plain), fmt_s(pt),
                      f"{plain / pt:.2f}x time", "", ""))
    if plainc and ptc:
        table.append(("  diagnostic, CPU time", fmt_s(plainc), fmt_s(ptc), f"{plainc / ptc:.2f}x time", "", ""))
    nc, ncc = pooled(rows, "train_nocache"), pooled(rows, "train_nocache", "cpu_steps")
    if nc and ss:
        table.append(("  diagnostic: SplitSeg with SPLITSEG_HOST_CACHE=off", fmt_s(nc), f"{fmt_s(ss)} (cache on)",
                      f"cache saves {(1 - ss / nc) * 100:.0f}%", "", ""))
    if ncc and ssc:
        table.append(("  diagnostic, CPU time", fmt_s(ncc), f"{fmt_s(ssc)} (cache on)",
                      f"cache saves {(1 - ssc / ncc) * 100:.0f}%", "", ""))
    meterc = pooled(rows, "train_plain_meter", "cpu_steps")
    if meterc and plainc:
        table.append(("  diagnostic: C++ loop under the CPU memory meter, CPU time", fmt_s(meterc), fmt_s(plainc),
                      f"{(meterc / plainc - 1) * 100:+.1f}% vs loop", "", ""))
    if split and ss:
        cost = split / ss - 1
        table.append(("split cost (emulated boundary after enc1, CPU only)", fmt_s(split), f"{fmt_s(ss)} (one device)",
                      f"{cost * 100:+.1f}%", "< 10%",
                      "load noise, see CPU time" if cost < -0.05 else ("met" if cost < 0.10 else "missed")))
    if splitc and ssc:
        cost = splitc / ssc - 1
        table.append(("  same, process CPU time", fmt_s(splitc), fmt_s(ssc), f"{cost * 100:+.1f}%", "< 10%",
                      "met" if cost < 0.10 else "missed"))
    plots["training"] = {"SplitSeg": ss, "SplitSeg, split": split, "SplitSeg, host cache off": nc,
                         "C++ plain loop": plain, "PyTorch eager": pt}

    m1, m4, one = pooled(rows, "ranks_m1"), pooled(rows, "ranks_m4"), pooled(rows, "ranks_one")
    r4 = first(rows, "ranks_m4") or {}
    label = (f"2 ranks x 1 thread, base {r4.get('base', '?')}, batch {r4.get('batch', '?')}, {r4.get('size', '?')}^3: "
             "4 micro-batches vs 1 (GPipe)")
    if m1 and m4:
        table.append((label, fmt_s(m4), f"{fmt_s(m1)} (M=1)", f"{m1 / m4:.2f}x throughput", ">= 1.5x",
                      "met" if m1 / m4 >= 1.5 else "missed"))
        if one:
            table.append(("  2 ranks (M=4) vs one process with 2 threads", fmt_s(m4), fmt_s(one),
                          f"{one / m4:.2f}x throughput", "", ""))
        def spread(kind):
            v = [x for r in rows if r.get("kind") == kind and "error" not in r for x in r.get("steps", [])]
            return f"{min(v):.2f}-{max(v):.2f} s over {len(v)} steps" if v else ""
        table.append(("  range of step times (M=4; M=1; one process)", spread("ranks_m4"), spread("ranks_m1"),
                      spread("ranks_one"), "", ""))
        for kind in ("ranks_m1", "ranks_m4"):
            per = {}
            for r in rows:
                if r.get("kind") == kind and "error" not in r:
                    for x in r.get("per_rank") or []:
                        per.setdefault(x["rank"], []).append((x["compute_s"], x["wait_s"]))
            if per:
                text = "; ".join(f"r{k}: {statistics.median(c for c, _ in v):.2f} / {statistics.median(w for _, w in v):.2f} s"
                                 for k, v in sorted(per.items()))
                table.append((f"  diagnostic, {kind[-2:].upper()}: per rank compute / wait (last step)", text, "", "", "", ""))
        b1, b4 = pooled(rows, "ranks_b1"), pooled(rows, "ranks_b4")
        if b1 and b4:
            table.append(("  diagnostic: one process, 1 thread, 4 steps of batch 1 vs 1 step of batch 4",
                          fmt_s(4 * b1), fmt_s(b4), f"{4 * b1 / b4:.2f}x time", "", ""))
        moved = [r.get("bytes_per_step") for r in rows if r.get("kind") in ("ranks_m1", "ranks_m4") and "error" not in r]
        if moved:
            table.append(("  bytes moved between the ranks per step", f"{max(moved) / 2**20:.1f} MiB", "", "", "", ""))
    elif first(rows, "ranks_m4") or first(rows, "ranks_m1"):
        err = (first(rows, "ranks_m4") or first(rows, "ranks_m1") or {}).get("error", "did not run")
        table.append((label, fmt_s(m4), fmt_s(m1), "n/a", ">= 1.5x", f"not measured: {err}"))

    sh2, sh0, shr = pooled(rows, "shard_two"), pooled(rows, "shard_none"), pooled(rows, "shard_ranks")
    s2 = first(rows, "shard_ranks") or first(rows, "shard_two") or {}
    label = (f"every stage sharded over 2 ranks x 1 thread vs unsharded, 1 process x 2 threads, base {s2.get('base', '?')}, "
             f"batch 1, {s2.get('size', '?')}^3")
    def spread_s(kind):
        v = [x for r in rows if r.get("kind") == kind and "error" not in r for x in r.get("steps", [])]
        return f"{min(v):.2f}-{max(v):.2f} s over {len(v)} steps" if v else ""
    if shr and sh0:
        table.append((label, fmt_s(shr), fmt_s(sh0), f"{shr / sh0:.2f}x time", "<= 1.25x",
                      "met" if shr / sh0 <= 1.25 else "missed"))
        table.append(("  range of step times (2 ranks; one process)", spread_s("shard_ranks"), spread_s("shard_none"), "", "", ""))
        moved = [r.get("bytes_per_step") for r in rows if r.get("kind") == "shard_ranks" and "error" not in r]
        if moved:
            table.append(("  bytes rank 0 sent per step (input slab, gathered outputs' gradients, halos, gradient sum)",
                          f"{max(moved) / 2**20:.1f} MiB", "", "", "", ""))
    elif first(rows, "shard_ranks"):
        table.append((label, "", fmt_s(sh0), "n/a", "<= 1.25x", f"not measured: {first(rows, 'shard_ranks').get('error')}"))
    if sh2 and sh0:
        table.append(("  diagnostic: one process, enc0/dec0/head in 2 slabs x 1 thread (devices standing in on the CPU)",
                      fmt_s(sh2), fmt_s(sh0), f"{sh2 / sh0:.2f}x time", "", ""))
        sht2 = pooled(rows, "shard_two_t2")
        if sht2:
            table.append(("  diagnostic: the same with the unsharded run's 2 intra-op threads", fmt_s(sht2), fmt_s(sh0),
                          f"{sht2 / sh0:.2f}x time", "", ""))
    halo = ((first(rows, "shard_plan") or {}).get("plan") or {}).get("halo_bytes")
    if halo is not None:
        table.append(("  halo exchanged per step, enc0/dec0/head in 2 slabs (planner)", f"{halo / 2**20:.2f} MiB", "", "", "", ""))
    pred = ((first(rows, "shard_cpu_plan") or {}).get("plan") or {}).get("predicted_step_seconds")
    if pred and sh0:
        err = pred / sh0 - 1
        table.append(("  planner's predicted step time of the unsharded CPU run vs measured", fmt_s(pred), fmt_s(sh0),
                      f"{err * 100:+.0f}%", "within 30%", "met" if abs(err) <= 0.30 else "missed"))

    si, mi = first(rows, "infer_splitseg") or {}, first(rows, "infer_monai") or {}
    vol = "x".join(str(s) for s in si.get("size", [])) or "?"
    label = f"sliding window {vol}, window {si.get('window', ['?'])[0]}, overlap {si.get('overlap', '?')}"
    # Pooled over the interleaved rounds; the differences come from the first round.
    st, mt = pooled(rows, "infer_splitseg", "runs"), pooled(rows, "infer_monai", "runs")
    if st and mt:
        thr = mt / st
        diff = mi.get("max_abs_diff")
        ok = thr >= 1.2 and diff is not None and diff <= 1e-4
        table.append((label, fmt_s(st), f"{fmt_s(mt)} (MONAI {mi.get('monai', '?')})", f"{thr:.2f}x throughput",
                      ">= 1.2x", "met" if thr >= 1.2 else "missed"))
        table.append(("  max abs diff vs MONAI (MONAI's Gaussian map)", f"{diff:.2e}", "", "", "<= 1e-4",
                      "met" if diff <= 1e-4 else "missed"))
        sc, mc = pooled(rows, "infer_splitseg", "cpu_runs"), pooled(rows, "infer_monai", "cpu_runs")
        if sc and mc:
            table.append(("  same, process CPU time", fmt_s(sc), fmt_s(mc), f"{mc / sc:.2f}x throughput", ">= 1.2x",
                          "met" if mc / sc >= 1.2 else "missed"))
        same = mi.get("max_abs_diff_same_weight_map")
        if same is not None:
            table.append(("  max abs diff, MONAI given SplitSeg's weight map", f"{same:.2e}", "", "", "(diagnostic)",
                          ""))
        nt, nct = pooled(rows, "infer_nocache", "runs"), pooled(rows, "infer_nocache", "cpu_runs")
        if nt and nct and sc:
            table.append(("  diagnostic: SplitSeg with SPLITSEG_HOST_CACHE=off", fmt_s(nt), f"{fmt_s(st)} (cache on)",
                          f"{mt / nt:.2f}x MONAI; CPU time {mc / nct:.2f}x" if mc else f"{mt / nt:.2f}x MONAI", "", ""))
        lt, lct = pooled(rows, "infer_ncdhw", "runs"), pooled(rows, "infer_ncdhw", "cpu_runs")
        if lt and lct and sc:
            table.append(("  diagnostic: SplitSeg with NCDHW weights (--default-layout)", fmt_s(lt),
                          f"{fmt_s(st)} (channels-last)",
                          f"{mt / lt:.2f}x MONAI; CPU time {mc / lct:.2f}x" if mc else f"{mt / lt:.2f}x MONAI", "", ""))
        plots["inference"] = {"SplitSeg": st, "SplitSeg, host cache off": nt, "SplitSeg, NCDHW weights": lt,
                              "MONAI": mt}
        _ = ok
    else:
        err = mi.get("error") or si.get("error") or "did not run"
        table.append((label, fmt_s(st), fmt_s(mt), "n/a", ">= 1.2x", f"not measured: {err}"))

    planner = []
    for r in rows:
        k = r.get("kind", "")
        if not k.startswith("plan_predicted:"):
            continue
        _, s, rc = k.split(":")
        m = first(rows, f"plan_measured:{s}:{rc}") or {}
        pred = None
        plan = r.get("plan") or {}
        for d in plan.get("devices", []):
            if d.get("name") == "cpu":
                # The meter starts counting at the first step: the parameters were allocated before
                # it and are invisible to it (Adam state and gradients are not), so they come off.
                params = sum(st.get("parameter_bytes", 0) for st in plan.get("stages", []) if st.get("device") == "cpu")
                pred = d.get("peak") - params
        meas = (m.get("peak_bytes") or {}).get("cpu")
        planner.append((int(s), rc, pred, meas))
    for s, rc, pred, meas in planner:
        err = f"{(pred - meas) / meas * 100:+.1f}%" if pred and meas else "n/a"
        table.append((f"planner, {s}^3, recompute {rc}", f"measured {mib(meas)}", f"predicted {mib(pred)}",
                      err, "(accuracy)", ""))
    plots["planner"] = planner

    skipped = first(rows, "volume_splitseg:synthetic") or {}
    if "error" in skipped:
        table.append(("volume loading", "skipped", "", "", "", skipped["error"]))
    for tag, goal in (("synthetic", 2.0), ("demo", 1.0)):
        sv, pv = pooled(rows, f"volume_splitseg:{tag}", "runs"), pooled(rows, f"volume_sitk:{tag}", "runs")
        if not sv:
            continue
        r = first(rows, f"volume_splitseg:{tag}") or {}
        size = "x".join(str(x) for x in r.get("size", [])) or "?"
        what = f"volume loading, {'synthetic int16 CT' if tag == 'synthetic' else 'demo CT'} {size} .nii.gz"
        peer = first(rows, f"volume_sitk:{tag}") or {}
        table.append((what, fmt_s(sv), f"{fmt_s(pv)} ({peer.get('peer', 'SimpleITK')})" if pv else "n/a",
                      f"{pv / sv:.2f}x throughput" if pv else "", f"< {goal:g} s", "met" if sv < goal else "missed"))
        plots[f"volume_{tag}"] = (sv, pv)
    ui = first(rows, "ui_stall") or {}
    if ui.get("error") or "longest_ms" not in ui:
        table.append(("UI stall while training (heartbeat)", "skipped", "", "", "", ui.get("error", "did not run")))
    else:
        table.append((f"UI stall while training, whole workstation, {ui.get('steps')} steps: longest",
                      f"{ui['longest_ms']:.0f} ms", "", "", "", ""))
        table.append(("  99th percentile (heartbeat every 5 ms)", f"{ui['p99_ms']:.1f} ms", "", "", "", ""))
    return table, plots


def render_table(table):
    head = ("benchmark", "SplitSeg", "peer", "ratio", "goal", "verdict")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def print_table(table):
    widths = [max(len(str(r[i])) for r in table + [("benchmark", "SplitSeg", "peer", "ratio", "goal", "verdict")])
              for i in range(6)]
    for row in [("benchmark", "SplitSeg", "peer", "ratio", "goal", "verdict")] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def make_plots(plots, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    outdir.mkdir(parents=True, exist_ok=True)
    made = []
    for name in ("training", "inference"):
        data = {k: v for k, v in plots.get(name, {}).items() if v}
        if not data:
            continue
        fig, ax = plt.subplots(figsize=(5.5, 3))
        ax.barh(list(data), list(data.values()), color=["#2a7" if "SplitSeg" in k else "#888" for k in data])
        ax.set_xlabel("median seconds (lower is better)")
        ax.set_title(f"{name}: SplitSeg vs peer")
        fig.tight_layout()
        fig.savefig(outdir / f"{name}.png", dpi=100)
        plt.close(fig)
        made.append(f"bench/{name}.png")
    pl = [p for p in plots.get("planner", []) if p[2] and p[3]]
    if pl:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for rc, marker in (("none", "o"), ("all", "s")):
            pts = [(m / 2**20, p / 2**20) for s, r, p, m in pl if r == rc]
            if pts:
                ax.scatter(*zip(*pts), marker=marker, label=f"recompute {rc}")
        hi = max(max(p, m) for _, _, p, m in pl) / 2**20 * 1.1
        ax.plot([0, hi], [0, hi], "k--", lw=0.8, label="exact")
        ax.set_xlabel("measured peak (MiB)")
        ax.set_ylabel("predicted peak (MiB)")
        ax.legend()
        ax.set_title("planner accuracy (CPU)")
        fig.tight_layout()
        fig.savefig(outdir / "planner.png", dpi=100)
        plt.close(fig)
        made.append("bench/planner.png")
    return made


def check_detail(c):
    """One line of a GPU check's key figures (worst case over its placements), from the check itself."""
    f = c.get("figures") or {}
    name = c.get("check")
    if name == "cuda_allowance":
        return f"{f.get('method')}: context {mib(f.get('context'))}, cuDNN workspace {mib(f.get('workspace'))}"
    per = [v for v in f.values() if isinstance(v, dict)]
    if name == "split_equivalence":
        out = max((v.get("output_max_abs", 0) for v in per), default=None)
        grad = max((v.get("grad_max_abs", 0) for v in per), default=None)
        return (f"{len(per)} placements vs one device, TF32 off: output max abs {out:.2e}, gradient max abs "
                f"{grad:.2e} (atol {f.get('atol')}, rtol {f.get('rtol')})") if per else ""
    if name == "dropout_reproduced":
        same = all(v.get("same_seed_identical") for v in per)
        ref = max((v.get("vs_reference_max_abs", 0) for v in per), default=None)
        other = min((v.get("other_seed_max_abs", 0) for v in per), default=None)
        return (f"{len(per)} placements: same seed identical {same}, vs reference max abs {ref:.2e}, "
                f"another seed differs by >= {other:.2e}") if per else ""
    if name == "training_equivalence":
        l1, l2 = f.get("loss_step1", {}), f.get("loss_step2", {})
        return (f"loss step 1 cpu {l1.get('cpu'):.7f} / cuda {l1.get('device'):.7f}, step 2 cpu {l2.get('cpu'):.7f} / "
                f"cuda {l2.get('device'):.7f}; weights max abs after 2 steps {f.get('weights_max_abs_after_2_steps'):.2e}")
    if name == "resume_exact":
        return f"weights max abs after resume {f.get('weights_max_abs_after_resume')}"
    return c.get("detail", "")


def gpu_section(path):
    p = Path(path)
    if not p.exists():
        return ("## GPU (H200)\n\nNot measured yet: run `tests/gpu/prepare.sh` here, then `tests/gpu/run.sh OUT` on the accelerator "
                "machine (carrying `.gpu-kit`); it writes `OUT/gpu.json` — copy it to `docs/bench/gpu.json` and rerun "
                "the benchmarks to fold it in.\n")
    g = json.loads(p.read_text())
    if g.get("mode") == "rehearse" or g.get("measured_on_gpu") is False:
        return ("## GPU (H200)\n\nNot measured yet: `docs/bench/gpu.json` holds a rehearsal without a GPU (CPU, tiny "
                "sizes), not a measurement. Run `tests/gpu/run.sh OUT` on the accelerator machine and copy `OUT/gpu.json`.\n")
    lines = [f"## GPU ({g.get('gpu', '?')}, {g.get('date', '?')}, tests/gpu/run.sh, {g.get('elapsed_s', '?')} s)", ""]
    checks = g.get("checks") or []
    if checks:
        lines += ["| check | result | figures |", "|---|---|---|"]
        lines += [f"| {c.get('check')} | {c.get('status')} | {check_detail(c)} |" for c in checks]
        lines.append("")
    e = g.get("equivalence")
    if e:
        lines += [f"Sliding-window inference, probabilities max abs difference: split vs one device "
                  f"{e.get('split_vs_one'):.2e}, split vs CPU {e.get('split_vs_cpu'):.2e}, one device vs CPU "
                  f"{e.get('one_vs_cpu'):.2e}.", ""]
    lines += ["Training steps (U-Net base 32, batch 1). Peaks are the caching allocator's (tensors + cuDNN "
              "workspaces, no context); predicted = planner tensors + the measured workspace; error = "
              "(predicted - measured) / measured.", "",
              "| size | precision | placement | median step | measured peak | predicted peak | error |",
              "|---|---|---|---|---|---|---|"]
    errs = []
    for r in g.get("runs", []):
        meas, pred = r.get("measured_peak"), r.get("predicted_peak")
        err = (pred - meas) / meas * 100 if meas and pred else None
        if err is not None:
            errs.append((err, r))
        step = r.get("median_step_seconds")
        lines.append(f"| {r.get('size')}^3 | {r.get('mode')} | {r.get('placement')} | "
                     f"{'OOM' if r.get('oom') else fmt_s(step)} | {mib(meas)} | {mib(pred)} | "
                     f"{'n/a' if err is None else f'{err:+.1f}%'} |")
    if errs:
        lo, hi = min(errs, key=lambda t: t[0]), max(errs, key=lambda t: t[0])
        lines += ["", f"Planner error over {len(errs)} measured rows: from {lo[0]:+.1f}% ({lo[1].get('size')}^3 "
                  f"{lo[1].get('mode')}) to {hi[0]:+.1f}% ({hi[1].get('size')}^3 {hi[1].get('mode')}); "
                  f"{sum(1 for x, _ in errs if x < 0)} rows under-predict."]
    sv = g.get("split_vs_single") or {}
    if sv:
        lines += ["", "| size | one device | split cuda:0/cpu | split cost |", "|---|---|---|---|"]
        for size, v in sorted(sv.items(), key=lambda t: int(t[0])):
            a, b = v.get("single"), v.get("split")
            cost = f"{(b - a) / a * 100:+.0f}%" if a and b else "n/a"
            lines.append(f"| {size}^3 | {fmt_s(a)} | {fmt_s(b)} | {cost} |")
    if g.get("largest"):
        lines += ["", f"Largest cube that trains under a {g.get('fraction_gib', '?')} GiB allocator cap "
                  "(a 16 GiB card's stand-in), steps of 32 voxels:", "",
                  "| mode | measured | planner says | sizes tried |", "|---|---|---|---|"]
        for mode, v in g["largest"].items():
            tried = ", ".join(f"{t.get('size')}{' OOM' if t.get('oom') else ''}" for t in v.get("tried", []))
            lines.append(f"| {mode} | {v.get('measured')}^3 | {v.get('predicted')}^3 | {tried} |")
    peer = {r.get("kind"): r for r in g.get("peer") or [] if "error" not in r}
    sizes = sorted({int(k.split(":")[1]) for k in peer})
    if sizes:
        lines += ["", "Training step against PyTorch eager on the same GPU (U-Net base 32, batch 1, the same exported "
                  "weights and input, default TF32 on both sides; tests/gpu/peer.sh):", "",
                  "| size | SplitSeg median (range) | PyTorch eager median (range) | ratio (time) | goal | eval logits max abs diff |",
                  "|---|---|---|---|---|---|"]
        for sz in sizes:
            a, b = peer.get(f"splitseg:{sz}") or {}, peer.get(f"pytorch:{sz}") or {}
            ma, mb = a.get("median_step_seconds"), b.get("median_step_seconds")
            rng = lambda r: f"{min(r['steps']):.4f}-{max(r['steps']):.4f} s" if r.get("steps") else ""
            ratio = f"{ma / mb:.2f}x" if ma and mb else "n/a"
            verdict = ("met" if ma / mb <= 0.9 else "missed") if ma and mb else ""
            lines.append(f"| {sz}^3 | {ma:.4f} s ({rng(a)}) | {mb:.4f} s ({rng(b)}) | {ratio} | <= 0.9x, {verdict} | "
                         f"{b.get('forward_max_abs_diff', float('nan')):.1e} |")
    ranks = [r for r in g.get("ranks") or [] if "error" not in r]
    if ranks:
        lines += ["", "Ranks (two processes joined through c10d, tensors through host memory; U-Net base 8, 32^3, "
                  "batch 4, 5 steps, dropout off) against one process:", "",
                  "| run | placement | micro-batches | weights max abs diff | loss max abs diff | median step | "
                  "one process | per rank: compute / wait / idle, sent |", "|---|---|---|---|---|---|---|---|"]
        for r in ranks:
            per = "; ".join(f"r{x['rank']} {x['device']}: {x['compute_s']:.3f} / {x['wait_s']:.3f} / {x['idle_s']:.3f} s, "
                            f"{x['bytes_sent'] / 2**20:.1f} MiB" for x in r.get("ranks") or [])
            lines.append(f"| {r['tag'][6:]} | {r['placement']} | {r['micro_batches']} | {r['max_weight_diff']:.2e} | "
                         f"{r['loss_diff']:.2e} | {fmt_s(r['median_step_seconds'])} | "
                         f"{fmt_s(r['single_median_step_seconds'])} | {per} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--docs", help="write benchmarks.md and bench/*.png here")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--date", default=datetime.date.today().isoformat(),
                    help="when the CPU results were measured (re-rendering old results keeps their date)")
    a = ap.parse_args()
    rows = load(a.results)
    table, plots = build(rows)
    print()
    print_table(table)
    if not a.docs:
        return
    docs = Path(a.docs)
    images = make_plots(plots, docs / "bench")
    try:
        import torch
        tv = torch.__version__
    except ImportError:
        tv = "?"
    tr = first(rows, "train_splitseg") or {}
    md = ["# Benchmarks", "",
          f"Measured {a.date} by `./test.sh --bench` (tests/bench/run.sh) on "
          f"{cpu_model()}, {tr.get('threads', '?')} threads on both sides, torch {tv}. "
          "Medians over interleaved rounds after warm-up; ratios always against the peer measured in the same run."
          + (" QUICK MODE: tiny sizes, numbers meaningless." if a.quick else ""), "",
          render_table(table), ""]
    md += [f"![{Path(i).stem}]({i})" for i in images]
    md += ["", gpu_section(a.gpu) if a.gpu else ""]
    analysis = HERE / "analysis.md"
    if analysis.exists():
        md += [analysis.read_text()]
    (docs / "benchmarks.md").write_text("\n".join(md).rstrip() + "\n")
    (docs / "bench").mkdir(parents=True, exist_ok=True)
    (docs / "bench" / "results.jsonl").write_text(Path(a.results).read_text())
    print(f"\nwrote {docs / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
