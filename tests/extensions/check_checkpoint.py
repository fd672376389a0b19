"""Opens a SplitSeg checkpoint in Python the safe way: torch.load(..., weights_only=True), which
refuses anything but plain containers, numbers, strings and tensors.

usage: check_checkpoint.py CHECKPOINT
Prints one JSON line (step, architecture, tensor counts); exit 0 when the layout is as documented
in core/checkpoint/CheckpointFile.h.
"""
import json
import sys

import torch

ckpt = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
meta = json.loads(ckpt["meta"])
model, adam = ckpt["model"], ckpt["adam"]
problems = []
if ckpt.get("format") != "splitseg-checkpoint":
    problems.append("format")
if not all(isinstance(t, torch.Tensor) for t in model.values()):
    problems.append("model holds something other than tensors")
for name, m in adam.items():
    if name not in model or m["exp_avg"].shape != model[name].shape or m["exp_avg_sq"].shape != model[name].shape:
        problems.append("adam state of " + name)
    if not isinstance(m["step"], int):
        problems.append("adam step of " + name)
if not all(torch.isfinite(t).all() for t in model.values() if t.is_floating_point()):
    problems.append("non-finite weights")
print(json.dumps({"step": meta["step"], "version": meta["version"], "architecture": meta["run"]["network"]["architecture"],
                  "tensors": len(model), "adam": len(adam), "lr": ckpt["adam_options"]["lr"],
                  "problems": problems}))
sys.exit(1 if problems else 0)
