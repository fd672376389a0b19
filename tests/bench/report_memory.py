"""Rows of what opening a real-size CT costs in memory (issue 50), from the mem_* records of
tests/bench/volume_memory.py: peak resident growth per command, against its goal."""
from bench_stats import Estimate, per_round, verdict

MiB = 1024 * 1024

# (kind, what the command does, goal as a multiple of decoded + float bytes, or a fixed MiB bound)
ROWS = (
    ("mem_info", "`splitseg-cli info` (header, streamed range)", None, 512),
    ("mem_load", "loading for work (`splitseg-bench volume --read`: the float volume)", 1.6, None),
    ("mem_infer", "`splitseg-cli infer --image` (load, preprocess, predict, write)", None, None),
    ("mem_open", "the workstation opens it (`splitseg FILE --screenshot`)", None, None),
)


def memory_rows(rep):
    rows = rep.rows
    for kind, what, factor, fixed in ROWS:
        rec = next((r for r in rows if r.get("kind") == kind), None)
        if rec is None:
            continue
        growth = per_round(rows, kind, "peak_growth_bytes")
        if not growth:
            rep.add(f"Memory: {what}", "not measured", "", "", "", rec.get("error", "did not run"))
            continue
        size = "x".join(str(x) for x in rec.get("size", []))
        base = rec["decoded_bytes"] + rec["float_bytes"]
        est = Estimate([v / MiB for v in growth.values()])
        rss = Estimate([v / MiB for v in per_round(rows, kind, "tree_rss_bytes").values()])
        secs = Estimate(list(per_round(rows, kind, "seconds").values()))
        if factor is not None:
            goal, bound = f"<= {factor:g}x (decoded + float) = {factor * base / MiB:.0f} MiB", factor * base / MiB
        elif fixed is not None:
            goal, bound = f"<= {fixed} MiB (constant)", fixed
        else:
            goal, bound = "", None
        label = (f"**Memory**, {what}: {size} {rec.get('pixelType')} .nii.gz ({rec['file_bytes'] / MiB:.0f} MiB file, "
                 f"{rec['decoded_bytes'] / MiB:.0f} MiB decoded, {rec['float_bytes'] / MiB:.0f} MiB as float)")
        ratio = est.median * MiB / base
        rep.add(label, est.text("{:.0f}", " MiB") + f" peak growth ({ratio:.2f}x decoded + float)",
                f"process tree RSS {rss.text('{:.0f}', ' MiB')}", f"{secs.median:.1f} s", goal,
                verdict(est, "<=", bound, min_rounds=3) if bound is not None else "", kind, est,
                extra={"mib": f"{est.median:.0f} MiB", "x": f"{ratio:.2f}x", "seconds": f"{secs.median:.1f} s"})
