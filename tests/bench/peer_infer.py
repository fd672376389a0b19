"""MONAI peer of SplitSeg's sliding-window inference (benchmark 2).

Same weights (splitseg-bench export), same volume and SplitSeg's probabilities (splitseg-bench
infer --out). Runs monai.inferers.sliding_window_inference with window, overlap 0.5, Gaussian
weighting (sigma 0.125 * window), sw_batch_size 1 as SplitSeg's Inferer, on sigmoid
probabilities (SplitSeg averages probabilities, not logits). Reports the median time and the
largest absolute difference, twice: with MONAI's own Gaussian map, and with SplitSeg's map passed
as roi_weight_map (separates the weighting convention from the network numerics).

Variants (run.sh labels each row): MONAI's defaults as above; tuned: `--sw-batch` equal to
SplitSeg's window batch, `--channels-last`, `--inference-mode` (and jemalloc preloaded by run.sh);
`--compile`: the predictor through torch.compile (inductor), its first call (compiling) timed apart.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_unet import allocator, build_from_state, load_state  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--splitseg", required=True, help="file written by splitseg-bench infer --out")
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--overlap", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sw-batch", type=int, default=1, help="sw_batch_size: windows per forward pass")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--inference-mode", action="store_true", help="torch.inference_mode instead of no_grad")
    ap.add_argument("--compile", action="store_true", help="torch.compile (inductor) the network")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    from monai import __version__ as monai_version
    from monai.inferers import sliding_window_inference

    net = build_from_state(load_state(a.state), a.base).eval()
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last_3d)
    model = torch.compile(net) if a.compile else net
    grad_off = torch.inference_mode if a.inference_mode else torch.no_grad
    ours = load_state(a.splitseg)
    image = ours["image"].unsqueeze(0)           # (1, 1, D, H, W)
    reference = ours["probabilities"]            # (1, D, H, W)
    roi = (a.window,) * 3

    def predictor(x):
        if a.channels_last:
            x = x.contiguous(memory_format=torch.channels_last_3d)
        return torch.sigmoid(model(x))

    def run(weight_map=None):
        with grad_off():
            return sliding_window_inference(image, roi, a.sw_batch, predictor, overlap=a.overlap, mode="gaussian",
                                            sigma_scale=0.125, roi_weight_map=weight_map)[0]

    t0 = time.perf_counter()
    if a.compile:
        # A whole pass: the windows MONAI slices out differ in strides from a fresh tensor and would
        # recompile inside the timed runs; compiling is timed here, apart.
        run()
    else:
        with grad_off():  # warm-up: one batch of windows, as the SplitSeg side
            predictor(torch.zeros(a.sw_batch, 1, *roi))
    first_call = time.perf_counter() - t0
    times, cpu_times, out = [], [], None
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = run()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    diff_monai_map = (out - reference).abs().max().item()
    same_map = run(ours["importance"].unsqueeze(0).unsqueeze(0))
    diff_same_map = (same_map - reference).abs().max().item()
    print(json.dumps({"peer": "monai", "monai": monai_version, "sw_batch_size": a.sw_batch,
                      "channels_last": a.channels_last, "inference_mode": a.inference_mode, "compile": a.compile,
                      "allocator": allocator(),
                      "first_call_seconds": first_call, "torch": torch.__version__, "median_seconds": statistics.median(times),
                      "runs": times, "cpu_runs": cpu_times, "threads": torch.get_num_threads(),
                      "max_abs_diff": diff_monai_map, "max_abs_diff_same_weight_map": diff_same_map,
                      "shape": list(reference.shape)}))


if __name__ == "__main__":
    main()
