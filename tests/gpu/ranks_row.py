"""One ranks row of the GPU kit (tests/gpu/run.sh step 1b): a ranks run against one process.

Reads WORK/g_{ref,name}.pt (one step) and WORK/r_{ref,name}.pt + .jsonl (--steps steps) and prints
one JSON line. The row passes when step 1's gradients agree within --grad-bound, relative to each
parameter's gradient (L2), and every step's loss within --loss-bound. After one Adam step the
first moment is exactly (1 - beta1) * gradient, so the checkpoints carry step 1's gradients.
The weights after all steps are reported with how many elements differ by more than
--weight-bound; they are not checked (explain_ranks.py says why: Adam's eps regime).
"""
import argparse
import json
import statistics

import torch


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def step1_gradients(ckpt):
    beta1 = float(ckpt["adam_options"]["beta1"])
    return {k: v["exp_avg"].double() / (1.0 - beta1) for k, v in ckpt["adam"].items()}


def losses(path):
    return [json.loads(l) for l in open(path) if l.startswith("{") and '"loss"' in l]


def main():
    ap = argparse.ArgumentParser()
    for opt in ("work", "name", "ref", "placement"):
        ap.add_argument("--" + opt, required=True)
    ap.add_argument("--micro-batches", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--weight-bound", type=float, required=True)
    ap.add_argument("--grad-bound", type=float, required=True)
    ap.add_argument("--loss-bound", type=float, required=True)
    a = ap.parse_args()
    rec = {"tag": "ranks:" + a.name, "placement": a.placement, "micro_batches": a.micro_batches,
           "threads_per_rank": a.threads, "bound": a.weight_bound, "grad_bound": a.grad_bound,
           "loss_bound": a.loss_bound, "reference": "one process, same devices, same threads per CPU stage"}
    try:
        ga, gb = (step1_gradients(load(f"{a.work}/g_{n}.pt")) for n in (a.ref, a.name))
        # Per parameter, |g_ref - g| / |g_ref| (L2): a sum's rounding is relative to its size, and
        # an element near zero has no scale of its own.
        rel = {k: float((ga[k] - gb[k]).norm() / max(float(ga[k].norm()), 1e-30)) for k in ga}
        worst_g = max(rel, key=rel.get)
        rec["grad_rel_diff"], rec["grad_worst_parameter"] = rel[worst_g], worst_g
        rec["grad_max_abs_diff"] = max(float((ga[k] - gb[k]).abs().max()) for k in ga)
        wa, wb = (load(f"{a.work}/r_{n}.pt")["model"] for n in (a.ref, a.name))
        diffs = {k: (wa[k] - wb[k]).abs() for k in wa}
        worst = max(diffs, key=lambda k: float(diffs[k].max()))
        rec["max_weight_diff"], rec["worst_parameter"] = float(diffs[worst].max()), worst
        rec["weights_over_bound"] = int(sum(int((d > a.weight_bound).sum()) for d in diffs.values()))
        rec["weights"] = int(sum(d.numel() for d in diffs.values()))
        steps, single = losses(f"{a.work}/r_{a.name}.jsonl"), losses(f"{a.work}/r_{a.ref}.jsonl")
        # Step 1's loss comes before any update: a difference there is the forward pass's.
        rec["loss_diffs"] = [x["loss"] - y["loss"] for x, y in zip(steps, single)]
        rec["loss_diff"] = max(abs(d) for d in rec["loss_diffs"])
        rec["median_step_seconds"] = statistics.median(s["seconds"] for s in steps[1:] or steps)
        rec["single_median_step_seconds"] = statistics.median(s["seconds"] for s in single[1:] or single)
        rec["ranks"] = steps[-1].get("ranks")
        ok = (len(steps) == len(single) == a.steps and rec["grad_rel_diff"] <= a.grad_bound
              and rec["loss_diff"] <= a.loss_bound)
        rec["status"] = "pass" if ok else "fail"
    except Exception as e:  # a missing checkpoint: the run failed; its .err says why
        rec["error"], rec["status"] = f"{type(e).__name__}: {e}", "fail"
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
