"""PyTorch-eager peer of SplitSeg's training step (benchmark 1).

Loads the weights, input and target that `splitseg-bench export` wrote, checks that this network
gives the same eval logits as SplitSeg's (so both time the identical computation), then times
forward + loss + backward + Adam step + Dice, as Trainer::step() does. Prints one JSON line.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_unet import build_from_state, load_state, loss_and_dice  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    state = load_state(a.state)
    dev = torch.device(a.device)
    net = build_from_state(state, a.base).to(dev)
    x, target = state["input"].to(dev), state["target"].to(dev)

    net.eval()
    with torch.no_grad():
        forward_diff = (net(x).cpu() - state["logits_eval"]).abs().max().item()
    net.train()

    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    times, cpu_times, losses = [], [], []
    for i in range(a.warmup + a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss, _dice = loss_and_dice(net(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    print(json.dumps({"peer": "pytorch-eager", "median_step_seconds": statistics.median(times), "steps": times, "cpu_steps": cpu_times,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "forward_max_abs_diff": forward_diff, "losses": losses}))


if __name__ == "__main__":
    main()
