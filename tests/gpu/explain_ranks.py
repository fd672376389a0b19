"""Where two SplitSeg checkpoints of the same run differ, and how large the gradients were there.

  python explain_ranks.py LABEL REFERENCE.pt OTHER.pt [BOUND]  -> one JSON line

Adam's update is m / (sqrt(v) + eps): for an element whose gradient is tiny, a rounding-level
change (another order of sums, another kernel) can flip its sign and move that weight by up to
lr per step, though the gradients agree to rounding. The checkpoints keep Adam's moments
(core/checkpoint: "adam" by parameter name, exp_avg / exp_avg_sq / step), so this says, for the
elements differing by more than BOUND, the gradient's RMS there (sqrt of the bias-corrected
exp_avg_sq) against the RMS over the whole parameter, and whether the two runs' first moments
agree in sign.
"""
import json
import sys

import torch


def rms(state, beta2):
    v = state["exp_avg_sq"].double()
    step = float(state["step"].item() if torch.is_tensor(state["step"]) else state["step"])
    return (v / (1.0 - beta2 ** step)).sqrt()


def main():
    label, ref_path, other_path = sys.argv[1:4]
    bound = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
    a, b = (torch.load(p, map_location="cpu", weights_only=True) for p in (ref_path, other_path))
    beta2 = float(a["adam_options"]["beta2"])
    out = {"label": label, "bound": bound, "parameters": {}, "elements": 0, "over_bound": 0}
    worst = []
    for name, wa in a["model"].items():
        wb = b["model"][name]
        d = (wa.double() - wb.double()).abs()
        over = d > bound
        out["elements"] += d.numel()
        n = int(over.sum())
        out["over_bound"] += n
        ga, gb = rms(a["adam"][name], beta2), rms(b["adam"][name], beta2)
        ma, mb = a["adam"][name]["exp_avg"].double(), b["adam"][name]["exp_avg"].double()
        whole = float(ga.pow(2).mean().sqrt())
        flat = int(d.flatten().argmax())  # each parameter's largest difference, over the bound or not
        worst.append({"parameter": name, "index": flat, "diff": float(d.flatten()[flat]),
                      "ref": float(wa.flatten()[flat]), "other": float(wb.flatten()[flat]),
                      "grad_rms_ref": float(ga.flatten()[flat]), "grad_rms_other": float(gb.flatten()[flat]),
                      "m_ref": float(ma.flatten()[flat]), "m_other": float(mb.flatten()[flat]),
                      "grad_rms_whole": whole})
        if n == 0:
            continue
        out["parameters"][name] = {
            "numel": d.numel(), "over_bound": n, "max_diff": float(d.max()),
            "grad_rms_whole": whole,
            "grad_rms_over_bound_max": float(ga[over].max()),
            "grad_rms_over_bound_median": float(ga[over].median()),
            "moment_sign_disagrees": int(((ma * mb) < 0)[over].sum()),
        }
    out["worst"] = sorted(worst, key=lambda w: -w["diff"])[:6]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
