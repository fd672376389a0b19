"""PyTorch-eager peer of SplitSeg's training step (benchmark 1).

Loads the weights, input and target that `splitseg-bench export` wrote, checks that this network
gives the same eval logits as SplitSeg's (so both time the identical computation), then times
forward + loss + backward + Adam step + Dice, as Trainer::step() does. Prints one JSON line.

Variants (run.sh labels each row): as a researcher writes it (no flags); tuned (run.sh preloads
jemalloc, `--channels-last` where it helps); `--compile` (torch.compile, inductor): the first
step's time, which includes compiling (or loading the compiled graph from the inductor cache),
is reported apart as `first_step_seconds` and never among the timed steps.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_unet import allocator, build_from_state, load_state, loss_and_dice  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--channels-last", action="store_true", help="weights and input in channels_last_3d")
    ap.add_argument("--compile", action="store_true", help="torch.compile (inductor) the network")
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
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last_3d)
        x = x.contiguous(memory_format=torch.channels_last_3d)
    model = torch.compile(net) if a.compile else net

    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    first_step = None
    times, cpu_times, losses = [], [], []
    for i in range(a.warmup + a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss, _dice = loss_and_dice(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if i == 0:
            first_step = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    print(json.dumps({"peer": "pytorch-compile" if a.compile else "pytorch-eager", "channels_last": a.channels_last,
                      "allocator": allocator(), "first_step_seconds": first_step,
"median_step_seconds": statistics.median(times), "steps": times, "cpu_steps": cpu_times,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "forward_max_abs_diff": forward_diff, "losses": losses}))


if __name__ == "__main__":
    main()
