"""Opens a SplitSeg TorchScript export in Python and compares it with SplitSeg's own output.

usage: check_export.py MODEL.pt SAMPLE_DIR   (SAMPLE_DIR from `splitseg-cli export --sample`)
Prints one JSON line; exit 0 when the outputs agree.
"""
import json
import pathlib
import sys

import torch

model_path, sample = sys.argv[1], pathlib.Path(sys.argv[2])
model = torch.jit.load(model_path, map_location="cpu")
model.eval()
x = torch.load(sample / "input.pt")
expected = torch.load(sample / "output.pt")
with torch.no_grad():
    y = model(x)
    # Another size (a multiple of the divisor) must work too: the graph is not size-specialised.
    meta_path = pathlib.Path(model_path).parent / (pathlib.Path(model_path).stem + ".preprocessing.json")
    meta = json.loads(meta_path.read_text())
    d = meta["input"]["size_divisor"]
    z = model(torch.randn(1, meta["input"]["channels"], 3 * d, 2 * d, 4 * d))
diff = (y - expected).abs().max().item()
ok = y.shape == expected.shape and diff <= 1e-4 and tuple(z.shape[2:]) == (3 * d, 2 * d, 4 * d)
print(json.dumps({"max_abs_diff": diff, "shape": list(y.shape), "architecture": meta["architecture"],
                  "parameters": sum(p.numel() for p in model.parameters()), "ok": ok}))
sys.exit(0 if ok else 1)
