"""The GPU section of docs/benchmarks.md, from docs/bench/gpu.json (tests/gpu/run.sh on the accelerator
machine): every figure comes from that file."""
import json
from pathlib import Path

# tests/gpu/run.sh's RANK_BOUND default, for rows measured before the kit recorded its bound.
RANK_BOUND = 1e-4


def fmt_s(v):
    return "n/a" if v is None else f"{v:.3f} s"


def mib(v):
    return "n/a" if v is None else f"{v / 2**20:.1f} MiB"


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
    replan = replan_rows(path)
    now = {(r["size"], r["mode"]): r["predicted_peak"] for r in replan if r["kind"] == "run"}
    lines += ["Training steps (U-Net base 32, batch 1). Peaks are the caching allocator's (tensors + cuDNN "
              "workspaces, no context); predicted = planner tensors + the measured workspace; error = "
              "(predicted - measured) / measured. The reserved peak is what a memory cap bounds: the allocated "
              "peak plus the blocks the caching allocator holds free (not recorded by the kits of 2026-12-04 and "
              "before). 'Planner now' is this commit's planner on the same runs "
              "(tests/gpu/replan.py -> docs/bench/gpu/replan.jsonl).", "",
              "| size | precision | placement | median step | measured peak | reserved peak | predicted peak (lease day) | "
              "error | planner now | error now |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    errs, errs_now = [], []
    pct = lambda e: "n/a" if e is None else f"{e:+.1f}%"
    for r in g.get("runs", []):
        meas, pred = r.get("measured_peak"), r.get("predicted_peak")
        pnow = now.get((r.get("size"), r.get("mode"))) if r.get("placement") == "single" else None
        err = (pred - meas) / meas * 100 if meas and pred else None
        err_now = (pnow - meas) / meas * 100 if meas and pnow else None
        if err is not None:
            errs.append((err, r))
        if err_now is not None:
            errs_now.append((err_now, r))
        step = r.get("median_step_seconds")
        lines.append(f"| {r.get('size')}^3 | {r.get('mode')} | {r.get('placement')} | "
                     f"{'OOM' if r.get('oom') else fmt_s(step)} | {mib(meas)} | "
                     f"{mib(r['reserved_peak']) if r.get('reserved_peak') else 'not recorded'} | {mib(pred)} | {pct(err)} | "
                     f"{mib(pnow) if pnow else 'n/a'} | {pct(err_now)} |")
    for label, es in (("on the lease day", errs), ("now", errs_now)):
        if es:
            lo, hi = min(es, key=lambda t: t[0]), max(es, key=lambda t: t[0])
            lines += ["", f"Planner error {label} over {len(es)} measured rows: from {lo[0]:+.1f}% "
                      f"({lo[1].get('size')}^3 {lo[1].get('mode')}) to {hi[0]:+.1f}% ({hi[1].get('size')}^3 "
                      f"{hi[1].get('mode')}); {sum(1 for x, _ in es if x < 0)} rows under-predict."]
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
                  "| mode | measured | planner said | planner now | sizes tried |", "|---|---|---|---|---|"]
        largest_now = {r["mode"]: r["predicted"] for r in replan if r["kind"] == "largest"}
        for mode, v in g["largest"].items():
            tried = ", ".join(f"{t.get('size')}{' OOM' if t.get('oom') else ''}" for t in v.get("tried", []))
            lines.append(f"| {mode} | {v.get('measured')}^3 | {v.get('predicted')}^3 | "
                         f"{str(largest_now[mode]) + '^3' if largest_now.get(mode) else 'n/a'} | {tried} |")
    peer = {r.get("kind"): r for r in g.get("peer") or [] if not r.get("error")}
    sizes = sorted({int(k.split(":")[1]) for k in peer})
    if sizes:
        lines += ["", "Training step against PyTorch eager on the same GPU (U-Net base 32, batch 1, the same exported "
                  "weights and input, default TF32 on both sides; tests/gpu/peer.sh). The C++ loop is SplitSeg's network "
                  "and LibTorch's Adam in a hand-written loop without the Trainer (splitseg-bench train --plain), where "
                  "measured:", "",
                  "| size | SplitSeg median (range) | C++ loop median (range) | PyTorch eager median (range) | ratio (time) | "
                  "goal | C++ loop / eager | eval logits max abs diff |",
                  "|---|---|---|---|---|---|---|---|"]
        rng = lambda r: f" ({min(r['steps']):.4f}-{max(r['steps']):.4f} s)" if r.get("steps") else ""
        for sz in sizes:
            a, b = peer.get(f"splitseg:{sz}") or {}, peer.get(f"pytorch:{sz}") or {}
            loop = peer.get(f"splitseg-loop:{sz}") or {}
            ma, mb, ml = a.get("median_step_seconds"), b.get("median_step_seconds"), loop.get("median_step_seconds")
            ratio = f"{ma / mb:.2f}x" if ma and mb else "n/a"
            verdict = ("met" if ma / mb <= 0.9 else "missed") if ma and mb else ""
            loop_cell = f"{ml:.4f} s{rng(loop)}" if ml else "not measured"
            loop_ratio = f"{ml / mb:.2f}x" if ml and mb else ""
            f4 = lambda v, r: "n/a" if v is None else f"{v:.4f} s{rng(r)}"
            lines.append(f"| {sz}^3 | {f4(ma, a)} | {loop_cell} | {f4(mb, b)} | {ratio} | <= 0.9x, {verdict} | "
                         f"{loop_ratio} | {b.get('forward_max_abs_diff', float('nan')):.1e} |")
    parted = [sz for sz in sizes if (peer.get(f"splitseg-parts:{sz}") or {}).get("timeline_parts")]
    if parted:
        kinds = ["batch", "forward", "loss", "backward", "optimizer"]
        lines += ["", "Where SplitSeg's step goes on the GPU (splitseg-bench train --timeline: medians per part; the "
                  "timeline synchronises at every span, so this is a breakdown, not a timing), and the step with each "
                  "batch drawn when its step starts instead of at the end of the step before (--no-prefetch):", "",
                  "| size | " + " | ".join(kinds) + " | step, batches drawn ahead | step, drawn when the step starts | "
                  "process CPU time per step: drawn ahead / C++ loop | step and CPU time, OpenMP threads asleep "
                  "when idle (OMP_WAIT_POLICY=passive) |",
                  "|---|" + "---|" * (len(kinds) + 4)]
        passive = lambda r: (f"{r['median_step_seconds']:.4f} s, {r['median_step_cpu_seconds']:.4f} s CPU"
                             if r and r.get("median_step_seconds") else "not measured")
        for sz in parted:
            parts = peer[f"splitseg-parts:{sz}"]["timeline_parts"]
            ahead = (peer.get(f"splitseg:{sz}") or {}).get("median_step_seconds")
            late = (peer.get(f"splitseg-noprefetch:{sz}") or {}).get("median_step_seconds")
            cells = [f"{parts[k] * 1e3:.2f} ms" if k in parts else "" for k in kinds]
            f4 = lambda v: "n/a" if v is None else f"{v:.4f} s"
            cpu = [(peer.get(k) or {}).get("median_step_cpu_seconds") for k in (f"splitseg:{sz}", f"splitseg-loop:{sz}")]
            lines.append(f"| {sz}^3 | " + " | ".join(cells) + f" | {f4(ahead)} | {f4(late)} | "
                         f"{f4(cpu[0])} / {f4(cpu[1])} | {passive(peer.get(f'splitseg-passive:{sz}'))} |")
    ranks = [r for r in g.get("ranks") or [] if not r.get("error")]
    if ranks:
        lines += ["", "Ranks (two processes joined through c10d, tensors through host memory; U-Net base 8, 32^3, "
                  "batch 4, 5 steps, dropout off) against one process on the same devices. Rows that record step 1's "
                  "gradients pass when those agree within the kit's bound (L2, relative, per parameter) and every "
                  "step's loss within its loss bound; older rows were judged on the weights after 5 steps "
                  "(tests/gpu/run.sh, RANK_GRAD_BOUND, RANK_LOSS_BOUND, RANK_BOUND):", "",
                  "| run | placement | micro-batches | step-1 gradients, relative diff (worst parameter) | "
                  "loss max abs diff | weights after 5 steps: max abs diff (worst parameter), elements over "
                  "the weight bound | passes | median step | one process | per rank: compute / wait / idle, sent |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in ranks:
            per = "; ".join(f"r{x['rank']} {x['device']}: {x['compute_s']:.3f} / {x['wait_s']:.3f} / {x['idle_s']:.3f} s, "
                            f"{x['bytes_sent'] / 2**20:.1f} MiB" for x in r.get("ranks") or [])
            bound = r.get("bound", RANK_BOUND)
            if "grad_rel_diff" in r:
                grad = f"{r['grad_rel_diff']:.1e} ({r['grad_worst_parameter']})"
                ok = r.get("status") == "pass"
                judged = f"gradients {r['grad_bound']:.0e}, loss {r['loss_bound']:.0e}"
            else:
                grad, ok, judged = "not recorded", r["max_weight_diff"] <= bound, f"weights {bound:.0e}"
            over = f", {r['weights_over_bound']} of {r['weights']} over {bound:.0e}" if "weights_over_bound" in r else ""
            worst = f" ({r['worst_parameter']})" if r.get("worst_parameter") else ""
            lines.append(f"| {r['tag'][6:]} | {r['placement']} | {r['micro_batches']} | {grad} | {r['loss_diff']:.2e} | "
                         f"{r['max_weight_diff']:.2e}{worst}{over} | {'yes' if ok else '**no**'} ({judged}) | "
                         f"{fmt_s(r['median_step_seconds'])} | {fmt_s(r['single_median_step_seconds'])} | {per} |")
    infer = g.get("ranks_infer") or []
    if infer:
        lines += ["", "Inference over the ranks (the same two halves, each window pass of 4 as micro-batches in flight) "
                  "against one process on the same device, 4 windows a pass (tests/gpu/run.sh, RANK_INFER_BOUND):", "",
                  "| run | placement | micro-batches | probabilities: max abs diff | passes | seconds | one process |",
                  "|---|---|---|---|---|---|---|"]
        for r in infer:
            diff = f"{r['max_abs_diff']:.2e}" if "max_abs_diff" in r else f"not measured: {r.get('error', '?')}"
            ok = "yes" if r.get("status") == "pass" else "**no**"
            lines.append(f"| {r['tag'][12:]} | {r.get('placement', '')} | {r.get('micro_batches', '')} | {diff} | "
                         f"{ok} ({r.get('bound', 0):.0e}) | {fmt_s(r.get('seconds'))} | {fmt_s(r.get('single_seconds'))} |")
    mem = g.get("inference_memory") or []
    if mem:
        infer_now = replanned_inference(path)
        lines += ["", "Inference memory: `splitseg-cli infer`'s planned tensor peak (plan --inference) against the "
                  "measured one (the allocator's peak on CUDA, every LibTorch allocation on the CPU); 'planner now' "
                  "is this commit's plan of the same prediction (tests/gpu/replan.py):", "",
                  "| volume | window | windows a pass | device | planned (lease day) | measured | error | planner now "
                  "| error now | seconds |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in mem:
            err = f"{r['error_pct']:+.1f}%" if r.get("error_pct") is not None else f"not measured: {r.get('error', '?')}"
            now = infer_now.get(r["tag"])
            err_now = pct((now - r["measured"]) / r["measured"] * 100) if now and r.get("measured") else "n/a"
            lines.append(f"| {r['size']}^3 | {'whole' if r['window'] == 0 else str(r['window']) + '^3'} | {r['per_pass']} | "
                         f"{r['device']} | {mib(r.get('planned'))} | {mib(r.get('measured'))} | {err} | {mib(now)} | "
                         f"{err_now} | {fmt_s(r.get('seconds'))} |")
    return "\n".join(lines) + "\n" + diagnosis_section(path) + snapshot_section(g)


def replan_rows(gpu_json):
    """This commit's planner on the lease's runs (tests/gpu/replan.py), if it was run."""
    p = Path(gpu_json).parent / "gpu" / "replan.jsonl"
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []


def replanned_inference(gpu_json):
    """This commit's planned tensor peak of each CUDA inference row, by its tag."""
    return {r["tag"]: r["predicted"] for r in replan_rows(gpu_json) if r["kind"] == "infer"}


def diagnosis_path(gpu_json):
    """The ranks diagnosis beside gpu.json (tests/gpu/diag_ranks.sh's diag.jsonl, copied there)."""
    return Path(gpu_json).parent / "gpu" / "ranks-diagnosis.jsonl"


def diagnosis_rows(gpu_json):
    p = diagnosis_path(gpu_json)
    if not p.exists():
        return []
    rows = [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
    return [r for r in rows if "label" in r and not r.get("error")]


def _side(name):
    if name.startswith("one-"):
        return f"one process, {name[4:]}"
    return f"ranks {name}"


def diagnosis_section(gpu_json):
    rows = diagnosis_rows(gpu_json)
    if not rows:
        return ""
    lines = ["", "Where checkpoints of the ranks runs differ (tests/gpu/diag_ranks.sh and explain_ranks.py, same flags "
             "as the ranks rows; 'mixed' is cpu | cuda:0, 'same' both halves on the GPU, 'cpu' both on the CPU; the "
             "gradient RMS is the square root of Adam's bias-corrected second moment at the element that differs "
             "most, against the RMS over its whole parameter):", "",
             "| steps | reference | compared with | weights over the bound (of all) | largest difference (parameter) | "
             "gradient RMS there, reference / compared | parameter's gradient RMS |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        steps, pair = r["label"].split(":", 1)
        a, b = pair.split("~")
        w = (r.get("worst") or [{}])[0]
        lines.append(f"| {steps[5:]} | {_side(a)} | {_side(b)} | {r['over_bound']} of {r['elements']} "
                     f"({r['bound']:.0e}) | {w.get('diff', float('nan')):.2e} ({w.get('parameter', '?')}) | "
                     f"{w.get('grad_rms_ref', float('nan')):.1e} / {w.get('grad_rms_other', float('nan')):.1e} | "
                     f"{w.get('grad_rms_whole', float('nan')):.1e} |")
    return "\n".join(lines) + "\n"


def gpu_values(gpu_json):
    """Figures from gpu.json and the ranks diagnosis that the analysis may cite ({{gpu_*.field}})."""
    p = Path(gpu_json)
    if not p.exists():
        return {}
    g = json.loads(p.read_text())
    checks = g.get("checks") or []
    values = {"gpu_lease": {"date": g.get("date", "n/a"), "device": g.get("gpu", "n/a"),
                            "checks": f"{sum(1 for c in checks if c.get('status') == 'pass')} of {len(checks)}"}}
    replan = replan_rows(gpu_json)
    mem = [r for r in g.get("inference_memory") or [] if r.get("measured") and r.get("error_pct") is not None]
    infer_now = replanned_inference(gpu_json)
    if mem and all(r["tag"] in infer_now for r in mem):
        now = [(infer_now[r["tag"]] - r["measured"]) / r["measured"] * 100 for r in mem]
        values["gpu_infer"] = {"rows": len(mem), "lease_lo": f"{min(r['error_pct'] for r in mem):+.1f}%",
                               "lease_hi": f"{max(r['error_pct'] for r in mem):+.1f}%",
                               "now_lo": f"{min(now):+.2f}%", "now_hi": f"{max(now):+.2f}%"}
    total = next((d.get("total") for d in g.get("devices") or [] if d.get("name") == "cuda:0"), None)
    run_now = {(r["size"], r["mode"]): r["predicted_peak"] for r in replan if r["kind"] == "run"}
    oom = [r for r in g.get("runs") or [] if r.get("placement") == "single" and not r.get("measured_peak")
           and (r["size"], r["mode"]) in run_now]
    if oom and total:
        r = oom[0]
        values["gpu_oom"] = {"run": f"{r['size']}^3 {r['mode']}", "planned": mib(run_now[(r["size"], r["mode"])]),
                             "total": mib(total)}
    ratios = []
    for mode, v in (g.get("largest") or {}).items():
        hit = next((t for t in v.get("tried") or [] if t.get("size") == v.get("measured") and t.get("reserved_peak_bytes")), None)
        if hit:
            ratios.append(hit["reserved_peak_bytes"]["cuda:0"] / hit["peak_bytes"]["cuda:0"])
    if ratios:
        values["gpu_largest"] = {"reserved_lo": f"{min(ratios):.2f}", "reserved_hi": f"{max(ratios):.2f}"}
    peer = {r.get("kind"): r for r in g.get("peer") or [] if not r.get("error")}
    eager = (peer.get("pytorch:128") or {}).get("median_step_seconds")
    if eager:
        def ratio(kind):
            v = (peer.get(kind) or {}).get("median_step_seconds")
            return f"{v / eager:.2f}" if v else "n/a"
        values["gpu_peer128"] = {"ahead": ratio("splitseg:128"), "late": ratio("splitseg-noprefetch:128"),
                                 "loop": ratio("splitseg-loop:128")}
    now = {(r["size"], r["mode"]): r["predicted_peak"] for r in replan_rows(gpu_json) if r["kind"] == "run"}
    big = [r for r in g.get("runs") or [] if r.get("placement") == "single" and r.get("size", 0) >= 128
           and r.get("measured_peak")]
    if big and now:
        lease = [(r["predicted_peak"] - r["measured_peak"]) / r["measured_peak"] * 100 for r in big]
        today = [(now[(r["size"], r["mode"])] - r["measured_peak"]) / r["measured_peak"] * 100
                 for r in big if (r["size"], r["mode"]) in now]
        values["gpu_planner"] = {"rows": len(big), "lease_lo": f"{min(lease):+.1f}%", "lease_hi": f"{max(lease):+.1f}%",
                                 "now_lo": f"{min(today):+.1f}%", "now_hi": f"{max(today):+.1f}%"}
    diag = {r["label"]: r for r in diagnosis_rows(gpu_json)}
    def worst(label, field, f="{:.1e}"):
        w = ((diag.get(label) or {}).get("worst") or [{}])[0]
        return f.format(w[field]) if field in w else "n/a"
    if diag:
        values["gpu_diag"] = {
            "ranks_vs_ref": worst("steps5:one-mixed~mixed-M4", "diff"),
            "ref_vs_same": worst("steps5:one-mixed~one-same", "diff"),
            "ref_vs_cpu": worst("steps5:one-cpu~one-mixed", "diff"),
            "ranks_vs_same": worst("steps5:same-M4~mixed-M4", "diff"),
            "grad_there": worst("steps5:one-mixed~mixed-M4", "grad_rms_ref"),
            "grad_param": worst("steps5:one-mixed~mixed-M4", "grad_rms_whole"),
            "step1_diff": worst("steps1:one-mixed~one-same", "diff"),
            "step1_grad_ref": worst("steps1:one-mixed~one-same", "grad_rms_ref"),
            "step1_grad_other": worst("steps1:one-mixed~one-same", "grad_rms_other"),
            "step1_grad_param": worst("steps1:one-mixed~one-same", "grad_rms_whole"),
        }
    return values


def snapshot_section(g):
    """What PyTorch eager holds at the peak of the same step (tests/gpu/peak_snapshot.py), beside
    SplitSeg's measured peak and the planner's prediction at that size (fp32, one device)."""
    snaps = [r for r in g.get("peak_snapshot") or [] if not r.get("error")]
    if not snaps:
        return ""
    lines = []
    for r in snaps:
        size = r["size"][0]
        run = next((x for x in g.get("runs") or [] if x["size"] == size and x["mode"] == "fp32"
                    and x["placement"] == "single"), {})
        lines += ["", f"At the peak of one fp32 training step at {size}^3, PyTorch eager on the same network held "
                  f"{mib(r['peak_bytes'])} ({mib(r['baseline_bytes'])} of it before the step: weights, Adam's moments, "
                  f"input); SplitSeg's step peaked at {mib(run.get('measured_peak'))} and the planner predicted "
                  f"{mib(run.get('predicted_peak'))}. Alive at eager's peak, by the operator that allocated it "
                  "(tests/gpu/peak_snapshot.py):", "", "| bytes | blocks | operator | Python line |", "|---|---|---|---|"]
        lines += [f"| {mib(x['bytes'])} | {x['blocks']} | `{x['op']}` | `{x['python']}` |" for x in r.get("groups") or []]
    return "\n".join(lines) + "\n"
