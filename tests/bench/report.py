"""Turns tests/bench/run.sh's results (JSON lines) into docs/benchmarks.md, plots and a summary.

Every figure in the report comes from the results file through this script: the table rows, the
planner table, the GPU section (docs/bench/gpu.json) and the figures inside the hand-written
analysis (tests/bench/analysis.md), which names them by placeholder ({{train_eager.ratio}}) and
may not contain a measured figure of its own (report_analysis.py refuses it). Ratios are medians
of per-round ratios with 95% bootstrap intervals; verdicts follow bench_stats.verdict.
"""
import argparse
import datetime
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import Estimate, per_round, pooled_median, ratio, verdict, verdict_within  # noqa: E402
from report_analysis import render_analysis  # noqa: E402
from report_gpu import fmt_s, gpu_section, gpu_values  # noqa: E402
from report_links import links_section  # noqa: E402
from report_planner import planner_rows  # noqa: E402
from report_memory import memory_rows  # noqa: E402

HERE = Path(__file__).resolve().parent
HEAD = ("benchmark", "SplitSeg", "peer", "ratio: median [95% interval]", "goal", "verdict")


def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def first(rows, kind):
    return next((r for r in rows if r.get("kind") == kind), None)


class Report:
    """Table rows plus the values the analysis may cite ({{id.field}})."""

    def __init__(self, rows):
        self.rows, self.table, self.values, self.summary, self.parent, self.section = rows, [], {}, [], "", ""

    def add(self, label, ours="", peer="", ratio_text="", goal="", verdict_text="", rid=None, est=None, extra=None):
        self.table.append((label, ours, peer, ratio_text, goal, verdict_text))
        if label.startswith("**"):
            self.section = label.split("**")[1]
        elif not label.startswith("    "):
            self.parent = label.strip()
        if rid:
            v = {"ours": ours, "peer": peer, "verdict": verdict_text or "(no goal)", "goal": goal}
            if est is not None and est.median is not None:
                v.update(ratio=f"{est.median:.2f}", lo=f"{est.lo:.2f}", hi=f"{est.hi:.2f}", n=str(est.n),
                         pct=f"{(est.median - 1) * 100:+.0f}%")
            v.update(extra or {})
            self.values[rid] = v
            full = f"{self.parent}; {label.strip()}" if label.startswith("    ") else label.strip()
            if not label.startswith("**") and self.section:
                full = f"{self.section}: {full}"
            self.summary.append({"id": rid, "label": full, "goal": goal, "verdict": verdict_text, "ours": ours,
                                 "median": None if est is None else est.median,
                                 "lo": None if est is None else est.lo, "hi": None if est is None else est.hi,
                                 "rounds": 0 if est is None else est.n})

    def compare(self, rid, label, a, b, peer_name, key="steps", op=None, threshold=None, throughput=False,
                unit="x"):
        """A row comparing kind a (SplitSeg side) with kind b (the peer) round by round."""
        ma, mb = pooled_median(self.rows, a, key), pooled_median(self.rows, b, key)
        est = ratio(self.rows, a, b, key, invert=throughput)
        what = " throughput" if throughput else " time"
        if est is None:
            err = (first(self.rows, a) or {}).get("error") or (first(self.rows, b) or {}).get("error") or "did not run"
            self.add(label, fmt_s(ma), fmt_s(mb), "n/a", goal_text(op, threshold, unit),
                     f"not measured: {err}" if op else "", rid)
            return None
        v = verdict(est, op, threshold) if op else ""
        peer = f"{fmt_s(mb)} ({peer_name})" if len(peer_name) <= 24 else fmt_s(mb)  # long names are in the label
        self.add(label, fmt_s(ma), peer, est.text(suffix=unit) + what,
                 goal_text(op, threshold, unit), v, rid, est)
        return est


def goal_text(op, threshold, unit="x"):
    return f"{op} {threshold:.2f}".rstrip("0") + ("0" if f"{threshold:.2f}".endswith(".00") else "") + unit if op else ""


def peer_label(rows, kind, default):
    r = next((x for x in rows if x.get("kind") == kind and not x.get("error")), None) or {}
    bits = [default]
    alloc = r.get("allocator") or "glibc"
    if alloc.startswith("jemalloc"):
        bits.append("jemalloc" + (", no purging" if "decay_ms:-1" in alloc else ""))
    elif alloc.startswith("glibc,"):
        bits.append("glibc malloc settings")
    if r.get("channels_last"):
        bits.append("channels-last")
    if r.get("inference_mode"):
        bits.append("inference mode")
    if "sw_batch_size" in r:
        bits.append(f"sw_batch_size {r['sw_batch_size']}")
    return ", ".join(bits)


def training(rep):
    rows = rep.rows
    tr = first(rows, "train_splitseg") or {}
    size = "x".join(str(s) for s in tr.get("size", [])) or "?"
    rep.add(f"**Training step**, U-Net base {tr.get('base', '?')}, {size}, {tr.get('threads', '?')} threads each side")
    rep.compare("train_eager", "  vs PyTorch eager as a researcher writes it", "train_splitseg", "train_pytorch",
                "PyTorch eager", op="<=", threshold=0.9)
    rep.compare("train_eager_cpu", "    same, process CPU time", "train_splitseg", "train_pytorch", "PyTorch eager",
                key="cpu_steps", op="<=", threshold=0.9)
    # The tuned peer is the faster of its two tuned variants in this run (peers at their best).
    tuned = [k for k in ("train_pytorch_tuned", "train_pytorch_tuned_je", "train_pytorch_tuned_je_cl")
             if pooled_median(rows, k)]
    best = min(tuned, key=lambda k: pooled_median(rows, k)) if tuned else "train_pytorch_tuned"
    name = peer_label(rows, best, "PyTorch eager tuned")
    rep.compare("train_tuned", f"  vs the tuned peer, the fastest tuned variant in this run: {name}",
                "train_splitseg", best, name, op="<=", threshold=1.0)
    rep.compare("train_tuned_cpu", "    same, process CPU time", "train_splitseg", best, name, key="cpu_steps",
                op="<=", threshold=1.0)
    for k in tuned:
        if k != best:
            rep.compare(None, f"    the other tuned variant: {peer_label(rows, k, 'PyTorch eager')}", "train_splitseg",
                        k, "PyTorch eager")
    rep.compare("train_compile", "  vs torch.compile (inductor, glibc malloc settings)", "train_splitseg", "train_compile",
                "torch.compile", op="<=", threshold=1.0)
    compile_row(rep, "train_compile", "first_step_seconds", "    compile time apart: first step")
    rep.compare("train_nocache", "  SplitSeg's host cache off vs on (SPLITSEG_HOST_CACHE=off)", "train_nocache",
                "train_splitseg", "cache on")
    rep.compare("train_nocache_eager", "  SplitSeg with the host cache off vs PyTorch eager as written", "train_nocache",
                "train_pytorch", "PyTorch eager")
    rep.compare("train_nocache_tuned", "  SplitSeg with the host cache off vs the tuned peer", "train_nocache", best,
                name)
    layout = lambda k: "channels-last" if (first(rows, k) or {}).get("channels_last") else "NCDHW"
    rep.compare("train_layout", f"  SplitSeg with the CPU layout auto did not pick ({layout('train_splitseg_other')}) "
                f"vs auto's ({layout('train_splitseg')})", "train_splitseg_other", "train_splitseg",
                layout("train_splitseg"))
    rep.compare("train_plain", "  diagnostic: hand-written C++ loop (no Trainer) vs PyTorch eager", "train_plain",
                "train_pytorch", "PyTorch eager")
    rep.compare("train_meter", "  diagnostic: the C++ loop under the CPU memory meter vs without, CPU time",
                "train_plain_meter", "train_plain", "loop", key="cpu_steps")
    diffs = [r.get("forward_max_abs_diff") for r in rows
             if r.get("kind", "").startswith("train_pytorch") and r.get("forward_max_abs_diff") is not None]
    if diffs:
        rep.add("  same network check: eval logits max abs diff (worst peer run)", f"{max(diffs):.2e}", "", "",
                "~1e-6", "", "train_same_net", extra={"diff": f"{max(diffs):.1e}"})


def compile_row(rep, kind, key, label):
    """Compiling is reported apart: the cold first step (round 1, empty inductor cache) and the warm ones."""
    recs = sorted((r for r in rep.rows if r.get("kind") == kind and not r.get("error") and r.get(key) is not None),
                  key=lambda r: int(r.get("round", 0)))
    if not recs:
        return
    cold, warm = recs[0][key], [r[key] for r in recs[1:]]
    warm_text = f"later rounds (warm cache) median {fmt_s(Estimate(warm).median)}" if warm else ""
    rep.add(label, f"cold cache {fmt_s(cold)}", warm_text, "", "", "", kind + "_first",
            extra={"cold": f"{cold:.0f} s", "warm": fmt_s(Estimate(warm).median) if warm else "n/a"})


def split_and_ranks(rep):
    rows = rep.rows
    r4 = first(rows, "ranks_m4") or first(rows, "ranks_m1") or {}
    shape = f"base {r4.get('base', '?')}, batch {r4.get('batch', '?')}, {r4.get('size', '?')}^3"
    rep.add(f"**Split across a process boundary**, {shape}")
    rep.compare("split_cost", "  2 ranks x 1 thread, one micro-batch (stages in turn) vs one process x 1 thread",
                "ranks_m1", "ranks_b4", "one process", op="<=", threshold=1.10)
    rep.compare("gpipe", "  2 ranks x 1 thread: 4 micro-batches vs 1 (GPipe)", "ranks_m4", "ranks_m1", "M=1",
                op=">=", threshold=1.5, throughput=True)
    rep.compare("ranks_vs_one", "  2 ranks (M=4) vs one process with 2 threads", "ranks_m4", "ranks_one",
                "one process, 2 threads", throughput=True)
    ri = first(rows, "rinfer_m4") or first(rows, "rinfer_m1")
    if ri:
        rep.add(f"**Inference over a process boundary**, base {ri.get('base', '?')}, {ri.get('size', '?')}^3 in "
                f"{ri.get('window', '?')}^3 windows, {ri.get('batch', '?')} a pass")
        rep.compare("rinfer_gpipe", "  2 ranks x 1 thread: the pass as 4 micro-batches vs 1", "rinfer_m4", "rinfer_m1",
                    "M=1", throughput=True)
        rep.compare("rinfer_vs_one", "  2 ranks (M=4) vs one process with 2 threads", "rinfer_m4", "rinfer_one",
                    "one process, 2 threads", throughput=True)
    est = ratio(rows, "ranks_b1", "ranks_b4")
    if est:
        est = Estimate([4 * v for v in est.values])  # four steps of batch 1 against one of batch 4
        rep.add("  diagnostic: one process, 1 thread, 4 steps of batch 1 vs 1 step of batch 4", "", "",
                est.text(suffix="x") + " time", "", "", "micro_cost", est)
    moved = [r.get("bytes_per_step") for r in rows if r.get("kind") in ("ranks_m1", "ranks_m4") and not r.get("error")]
    if moved:
        rep.add("  bytes moved between the ranks per step", f"{max(moved) / 2**20:.1f} MiB", "", "", "", "",
                "ranks_bytes", extra={"mib": f"{max(moved) / 2**20:.0f} MiB"})
    # Each stage's compute at M=1, one rank per stage (what the placement was chosen from).
    st = first(rows, "ranks_stages")
    if st and not st.get("error") and st.get("per_rank"):
        owner = {int(dev.split(":")[0][1:]): name for name, dev in
                 (e.split("=", 1) for e in (st.get("placement") or "").split(",") if "=" in e)}
        comp = {x["rank"]: x["compute_s"] for x in st["per_rank"]}
        total = sum(comp.values())
        text = ", ".join(f"{owner.get(r, f'r{r}')} {c:.2f}" for r, c in sorted(comp.items()))
        rep.add("  diagnostic: each stage's compute at M=1, one rank per stage (s)", text, rid="ranks_stages",
                extra={"total": f"{total:.1f} s",
                       **{f"{owner.get(r, r)}_share": f"{100 * c / total:.0f}%" for r, c in comp.items()}})
    # The planner's GPipe replay for this placement (StepTime), every stage at one CPU speed: its
    # predicted M=1 over M=4 step time, against the measured ratio above.
    p1 = ((first(rows, "ranks_plan_m1") or {}).get("plan") or {}).get("predicted_step_seconds")
    p4 = ((first(rows, "ranks_plan_m4") or {}).get("plan") or {}).get("predicted_step_seconds")
    if p1 and p4:
        rep.add("  diagnostic: the planner's GPipe replay of this placement, M=4 vs M=1 (FLOPs at one speed)", "", "",
                f"{p1 / p4:.2f}x throughput", "", "", "gpipe_plan", extra={"ratio": f"{p1 / p4:.2f}"})
    for kind in ("ranks_m1", "ranks_m4"):
        per = {}
        for r in rows:
            if r.get("kind") == kind and not r.get("error"):
                for x in r.get("per_rank") or []:
                    per.setdefault(x["rank"], []).append((x["compute_s"], x["wait_s"]))
        if per:
            text = "; ".join(f"r{k}: {Estimate([c for c, _ in v]).median:.2f} / {Estimate([w for _, w in v]).median:.2f} s"
                             for k, v in sorted(per.items()))
            extra = {f"r{k}_compute": f"{Estimate([c for c, _ in v]).median:.2f} s" for k, v in per.items()}
            rep.add(f"  diagnostic, {kind[-2:].upper()}: per rank compute / wait (last step, median over rounds)", text,
                    rid=f"{kind}_ranks", extra=extra)


def sharding(rep):
    rows = rep.rows
    s2 = first(rows, "shard_ranks") or first(rows, "shard_two") or {}
    rep.add(f"**Sharded stages**, base {s2.get('base', '?')}, batch 1, {s2.get('size', '?')}^3")
    rep.compare("shard_ranks", "  every stage sharded over 2 ranks x 1 thread vs unsharded, 1 process x 2 threads",
                "shard_ranks", "shard_none", "unsharded", op="<=", threshold=1.25)
    rep.compare("shard_two", "  diagnostic: one process, enc0/dec0/head in 2 slabs x 1 thread vs unsharded",
                "shard_two", "shard_none", "unsharded")
    rep.compare("shard_two_t2", "  diagnostic: the same with the unsharded run's 2 intra-op threads", "shard_two_t2",
                "shard_none", "unsharded")
    moved = [x.get("bytes_sent", 0) for r in rows if r.get("kind") == "shard_ranks" and not r.get("error")
             for x in r.get("per_rank") or [] if x.get("rank") == 0]
    if moved:
        rep.add("  bytes rank 0 sent per step (input slab, gathered outputs' gradients, halos, gradient sum)",
                f"{max(moved) / 2**20:.1f} MiB", "", "", "", "", "shard_bytes",
                extra={"mib": f"{max(moved) / 2**20:.0f} MiB"})
    halo = ((first(rows, "shard_plan") or {}).get("plan") or {}).get("halo_bytes")
    if halo is not None:
        rep.add("  halo exchanged per step, enc0/dec0/head in 2 slabs (planner)", f"{halo / 2**20:.2f} MiB", "", "",
                "", "", "shard_halo", extra={"mib": f"{halo / 2**20:.1f} MiB"})
    shard_peaks(rep)
    pred = ((first(rows, "shard_cpu_plan") or {}).get("plan") or {}).get("predicted_step_seconds")
    meas = per_round(rows, "shard_none")
    if pred and meas:
        est = Estimate([pred / v for v in meas.values()])
        rep.add("  planner's predicted step time of the unsharded CPU run (CPU speed measured at the size planned by plan "
                "--measure-speed) / measured", fmt_s(pred),
                fmt_s(pooled_median(rows, "shard_none")), est.text(suffix="x"), "within 30%",
                verdict_within(est, 0.7, 1.3), "step_time", est)


def shard_peaks(rep):
    """Planner vs measured per-device peak of the 2-rank sharded run: each rank's CPU allocation hook over
    a step (its weights and Adam's moments exist before the step, so the planner's persistent bytes are
    left out on that side too), median over the rounds, against the planner's peak for that rank."""
    rows = rep.rows
    devices = ((first(rows, "shard_rank_plan") or {}).get("plan") or {}).get("devices") or []
    measured = {}
    for r in rows:
        if r.get("kind") == "shard_ranks" and not r.get("error"):
            for x in r.get("per_rank") or []:
                if x.get("peak_bytes"):
                    measured.setdefault(x["rank"], []).append(x["peak_bytes"])
    if not devices or not measured:
        return
    parts, errors = [], []
    for d in devices:
        rank = int(d["name"].split(":")[0][1:])
        if rank not in measured:
            continue
        meas = statistics.median(measured[rank])
        pred = d["peak"] - d["persistent_bytes"]
        err = (pred - meas) / meas
        errors.append(err)
        parts.append(f"r{rank}: {meas / 2**20:.1f} / {pred / 2**20:.1f} MiB ({err * 100:+.1f}%)")
    if not errors:
        return
    worst = max(errors, key=abs)
    rep.add("  planner vs measured per-device peak, every stage sharded over 2 ranks (allocation hook; "
            "measured / predicted)", "; ".join(parts), "", f"{worst * 100:+.1f}% (worst)", "within 10%",
            "met" if all(abs(e) <= 0.10 for e in errors) else "missed", "shard_peak",
            extra={"worst": f"{worst * 100:+.1f}%", "worst_abs": f"{abs(worst) * 100:.1f}%"})


def inference(rep):
    rows = rep.rows
    si = first(rows, "infer_splitseg") or {}
    vol = "x".join(str(s) for s in si.get("size", [])) or "?"
    rep.add(f"**Sliding-window inference** {vol}, window {(si.get('window') or ['?'])[0]}, overlap "
            f"{si.get('overlap', '?')}, {si.get('window_batch', 1)} window per pass")
    mono = next((r for r in rows if r.get("kind", "").startswith("infer_monai") and r.get("monai")), {})
    ver = f"MONAI {mono.get('monai', '')}".strip()
    specs = (("infer_monai", "infer_default", f"{ver} default (sw_batch_size 1)", 1.2),
             ("infer_monai_tuned", "infer_tuned", peer_label(rows, "infer_monai_tuned", f"{ver} tuned"), 1.0),
             ("infer_monai_compile", "infer_compile", peer_label(rows, "infer_monai_compile", f"{ver} + torch.compile"),
              1.0))
    for kind, rid, name, goal in specs:
        rep.compare(rid, f"  vs {name}", "infer_splitseg", kind, name, key="runs", op=">=", threshold=goal,
                    throughput=True)
        rep.compare(rid + "_cpu", "    same, process CPU time", "infer_splitseg", kind, name, key="cpu_runs",
                    op=">=", threshold=goal, throughput=True)
        diffs = [r["max_abs_diff"] for r in rows if r.get("kind") == kind and r.get("max_abs_diff") is not None]
        if diffs:
            worst = max(diffs)
            rep.add("    max abs diff of the probabilities (worst round)", f"{worst:.2e}", "", "", "<= 1e-4",
                    "met" if worst <= 1e-4 else "missed", rid + "_diff", extra={"diff": f"{worst:.1e}"})
    compile_row(rep, "infer_monai_compile", "first_call_seconds", "    compile time apart: first call")
    same = [r["max_abs_diff_same_weight_map"] for r in rows
            if r.get("kind") == "infer_monai" and r.get("max_abs_diff_same_weight_map") is not None]
    if same:
        rep.add("  diagnostic: max abs diff, MONAI given SplitSeg's weight map", f"{max(same):.2e}")
    rep.compare("infer_nocache", "  SplitSeg's host cache off vs on", "infer_nocache", "infer_splitseg", "cache on",
                key="runs")
    rep.compare("infer_ncdhw", "  SplitSeg with NCDHW weights (--default-layout) vs channels-last", "infer_ncdhw",
                "infer_splitseg", "channels-last", key="runs")
    rep.compare("infer_nocache_monai", "  SplitSeg with the host cache off vs MONAI default", "infer_nocache",
                "infer_monai", "MONAI", key="runs", throughput=True)


def volumes_and_ui(rep):
    rows = rep.rows
    for tag, goal in (("synthetic", 2.0), ("demo", 1.0)):
        mine = per_round(rows, f"volume_splitseg:{tag}", "runs")
        if not mine:
            err = (first(rows, f"volume_splitseg:{tag}") or {}).get("error")
            if err:
                rep.add(f"volume loading ({tag})", "skipped", "", "", "", err)
            continue
        r = first(rows, f"volume_splitseg:{tag}") or {}
        size = "x".join(str(x) for x in r.get("size", [])) or "?"
        peer = first(rows, f"volume_sitk:{tag}") or {}
        label = f"**Volume loading**, {'synthetic int16 CT' if tag == 'synthetic' else 'demo CT'} {size} .nii.gz"
        est = Estimate(list(mine.values()))
        rep.add(label, est.text("{:.3f}", " s"), "", "", f"< {goal:g} s", verdict(est, "<=", goal), f"volume_{tag}",
                est, extra={"seconds": f"{est.median:.2f} s"})
        rep.compare(f"volume_{tag}_sitk", f"  vs {peer.get('peer', 'SimpleITK')}", f"volume_splitseg:{tag}",
                    f"volume_sitk:{tag}", peer.get("peer", "SimpleITK"), key="runs", throughput=True)
        rep.compare(f"volume_{tag}_iso", "  SplitSeg's reader in a forked child (default) vs in process "
                    "(SPLITSEG_READ_ISOLATION=off)", f"volume_splitseg:{tag}", f"volume_noiso:{tag}", "in process",
                    key="runs")
    for kind, rid, what in (("ui_stall", "ui_p99", "the whole workstation trains (Training tab in front)"),
                            ("ui_stall_ranks", "ui_ranks_p99",
                             "the workstation trains over 2 ranks (decoders on a local worker)"),
                            ("ui_stall_placement", "ui_placement_p99",
                             "the workstation trains with the Placement tab in front (charts hidden)")):
        ui = per_round(rows, kind, "p99_ms")
        if not ui:
            rep.add(f"UI stall while {what}", "skipped", "", "", "", (first(rows, kind) or {}).get("error", "did not run"))
            continue
        est = Estimate(list(ui.values()))
        longest = max((r["longest_ms"] for r in rows if r.get("kind") == kind and "longest_ms" in r), default=0)
        steps = (first(rows, kind) or {}).get("steps")
        goal = kind != "ui_stall_placement"  # a diagnostic: what the charts' repaints cost
        rep.add(f"**UI stall** while {what}, {steps} steps: 99th percentile (5 ms heartbeat)",
                est.text("{:.1f}", " ms"), "", "", "< 16 ms" if goal else "",
                verdict(est, "<=", 16.0, min_rounds=3) if goal else "", rid, est,
                extra={"ms": f"{est.median:.1f} ms", "longest": f"{longest:.0f} ms"})
        rep.add("  longest stall over all runs", f"{longest:.0f} ms")

def build(rows):
    rep = Report(rows)
    training(rep)
    split_and_ranks(rep)
    sharding(rep)
    inference(rep)
    volumes_and_ui(rep)
    memory_rows(rep)
    return rep


def render_table(table):
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table]
    return "\n".join(lines)


def goals_table(summary):
    """Every goal of issue 17 side by side: the figure, its interval and the verdict."""
    lines = ["| goal | median [95% interval] | verdict |", "|---|---|---|"]
    for g in summary:
        if not g.get("goal"):
            continue
        if g["id"].startswith("planner_"):
            fig = f"worst {g['median'] * 100:+.1f}%, most under {g['lo'] * 100:+.1f}% ({g['rounds']} held-out configurations)"
        elif g.get("median") is None:
            fig = g.get("ours") or "n/a"
        else:
            fig = f"{g['median']:.2f} [{g['lo']:.2f}, {g['hi']:.2f}] ({g['rounds']} rounds)"
        lines.append(f"| {g['label'].replace('**', '').strip()}: {g['goal']} | {fig} | {g['verdict']} |")
    return "\n".join(lines)


def isa(r):
    """The CPU's vector extension as run.sh recorded it (records before 2026-12-03 have none)."""
    return f" ({r['isa']})" if r.get("isa") else ""


def machine_line(rows, date, quick):
    m = first(rows, "machine") or {}
    torch_v = next((r.get("torch") for r in rows if r.get("torch")), "?")
    # Sections may be rerun with another round count (BENCH_ROUNDS); each figure states its own.
    per_kind = {}
    for r in rows:
        if int(r.get("round", 0)) > 0:
            per_kind[r.get("kind")] = max(per_kind.get(r.get("kind"), 0), int(r["round"]))
    counts = sorted(set(per_kind.values()))
    rounds = (f"{counts[0]} interleaved rounds" if len(counts) == 1 else
              f"{counts[0]}-{counts[-1]} interleaved rounds (each figure says how many)") if counts else \
        "0 interleaved rounds"
    cpu = (m.get("cpu") or platform.processor() or "unknown CPU") + isa(m)
    return (f"Measured {m.get('date', date)} by `./test.sh --bench` (tests/bench/run.sh) on {cpu}, "
            f"{m.get('cores', '?')} cores, {m.get('threads', '?')} threads on every side, torch {torch_v}; "
            f"{rounds}, the order of the sides reversed every other round, warm-up steps "
            "never timed. Each ratio is the median of the per-round ratios with a 95% bootstrap interval over the "
            "rounds; a goal is met only when the whole interval is on its side, missed when the whole interval "
            "is on the other side, and not shown otherwise."
            + "".join(f" Rerun on {r.get('date', '?')} on {r.get('cpu', '?')}{isa(r)}, {r.get('cores', '?')} cores: "
                      + ", ".join(f"`{k}`" for k in r.get("kinds", [])) + "."
                      for r in rows if r.get("kind") == "machine_rerun")
            + (" QUICK MODE: tiny sizes and one round, numbers meaningless." if quick else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--docs", help="write benchmarks.md and bench/*.png here")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--links", default="", help="docs/bench/links.jsonl (tests/bench/links.sh)")
    ap.add_argument("--analysis", default=str(HERE / "analysis.md"))
    ap.add_argument("--summary", help="write every goal row (median, interval, verdict) as JSON here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    a = ap.parse_args()
    rows = load(a.results)
    rep = build(rows)
    prow, pvalues, psummary, planner_md = planner_rows(rows)
    rep.values.update(pvalues)
    rep.summary += psummary
    if a.gpu:
        rep.values.update(gpu_values(a.gpu))
    analysis = render_analysis(Path(a.analysis), rep.values) if a.analysis else ""  # exits on a hand-written figure
    if a.summary:
        Path(a.summary).write_text(json.dumps(rep.summary, indent=1) + "\n")
    print(render_table(rep.table))
    print(planner_md)
    if not a.docs:
        return
    docs = Path(a.docs)
    (docs / "bench").mkdir(parents=True, exist_ok=True)
    from report_plots import make_plots
    images = make_plots(rep, prow, docs / "bench")
    md = ["# Benchmarks", "", "Generated whole by tests/bench/report.py from docs/bench/results.jsonl; do not edit.", "",
          machine_line(rows, a.date, a.quick), "", "## Goals", "", goals_table(rep.summary), "",
          "## All rows", "", render_table(rep.table), "", planner_md, ""]
    md += [f"![{Path(i).stem}]({i})" for i in images]
    md += ["", gpu_section(a.gpu) if a.gpu else "", links_section(a.links), analysis]
    (docs / "benchmarks.md").write_text("\n".join(md).rstrip() + "\n")
    if Path(a.results).resolve() != (docs / "bench" / "results.jsonl").resolve():
        (docs / "bench" / "results.jsonl").write_text(Path(a.results).read_text())
    print(f"\nwrote {docs / 'benchmarks.md'}")


if __name__ == "__main__":
    main()
