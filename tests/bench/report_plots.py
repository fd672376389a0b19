"""Plots for docs/benchmarks.md: per-round ratios with their medians and intervals, planner accuracy."""


def make_plots(rep, planner, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    from bench_stats import ratio
    outdir.mkdir(parents=True, exist_ok=True)
    made = []
    # (title, goal line, [(label, kind a, kind b, key, throughput)])
    groups = {
        "training": ("training step time, SplitSeg / peer (lower is better)", [0.9, 1.0], [
            ("eager as written", "train_splitseg", "train_pytorch", "steps", False),
            ("eager tuned (glibc)", "train_splitseg", "train_pytorch_tuned", "steps", False),
            ("eager tuned (jemalloc)", "train_splitseg", "train_pytorch_tuned_je", "steps", False),
            ("eager tuned (jemalloc, CL)", "train_splitseg", "train_pytorch_tuned_je_cl", "steps", False),
            ("SplitSeg other layout / eager tuned (jemalloc, CL)", "train_splitseg_other", "train_pytorch_tuned_je_cl",
             "steps", False),
            ("torch.compile", "train_splitseg", "train_compile", "steps", False),
            ("SplitSeg cache off / eager", "train_nocache", "train_pytorch", "steps", False)]),
        "inference": ("sliding-window throughput, SplitSeg / peer (higher is better)", [1.0, 1.2], [
            ("MONAI default", "infer_splitseg", "infer_monai", "runs", True),
            ("MONAI tuned", "infer_splitseg", "infer_monai_tuned", "runs", True),
            ("MONAI + compile", "infer_splitseg", "infer_monai_compile", "runs", True),
            ("SplitSeg cache off / MONAI", "infer_nocache", "infer_monai", "runs", True),
            ("SplitSeg NCDHW / MONAI", "infer_ncdhw", "infer_monai", "runs", True)]),
    }
    for name, (title, goals, items) in groups.items():
        data = [(lab, ratio(rep.rows, a, b, key, invert=t)) for lab, a, b, key, t in items]
        data = [(lab, e) for lab, e in data if e is not None]
        if not data:
            continue
        fig, ax = plt.subplots(figsize=(7.5, 0.8 + 0.5 * len(data)))
        for i, (lab, e) in enumerate(data):
            ax.scatter(e.values, [i] * len(e.values), s=12, color="#999", zorder=2)
            ax.errorbar([e.median], [i], xerr=[[e.median - e.lo], [e.hi - e.median]], fmt="o", color="#2a7",
                        capsize=4, zorder=3)
        for g in goals:
            ax.axvline(g, color="k", lw=0.8, ls="--")
        ax.set_yticks(range(len(data)), [lab for lab, _ in data])
        ax.invert_yaxis()
        ax.set_xlabel("per round (grey); median, 95% interval (green); dashed: goals", fontsize=9)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(outdir / f"{name}.png", dpi=100)
        plt.close(fig)
        made.append(f"bench/{name}.png")
    pts = [r for r in planner if r["hook_error"] is not None]
    if pts:
        fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.35 * len(pts)))
        labels = [r["label"] + (" (fit)" if r["set"] == "fit" else "") for r in pts]
        ys = range(len(pts))
        ax.scatter([r["hook_error"] * 100 for r in pts], ys, marker="o", label="vs allocation hook")
        ax.scatter([r["rss_error"] * 100 for r in pts if r["rss_error"] is not None],
                   [y for y, r in zip(ys, pts) if r["rss_error"] is not None], marker="s", label="vs resident growth")
        for x in (-5, -2, 5):
            ax.axvline(x, color="k", lw=0.8, ls="--")
        ax.set_yticks(list(ys), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("planner error, % (negative: under-predicted)")
        ax.legend(fontsize=8)
        ax.set_title("planner accuracy on the CPU", fontsize=10)
        fig.tight_layout()
        fig.savefig(outdir / "planner.png", dpi=100)
        plt.close(fig)
        made.append("bench/planner.png")
    return made
