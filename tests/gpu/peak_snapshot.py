"""What is alive on the GPU at the peak of one training step of the same U-Net in PyTorch eager.

  python peak_snapshot.py --state ST.pt --base 32 [--device cuda:0]  -> one JSON line

On the 2026-12-04 lease SplitSeg's planner under-predicted the allocator's peak on CUDA by 11-25 %
at 128^3-256^3 while it is within 5 % on the CPU (docs/benchmarks.md). This runs the peer network
(tests/bench/peer_unet.py: the weights and input `splitseg-bench export` wrote, so the same
computation as SplitSeg's step) for two warm-up steps, then one step under
torch.cuda.memory._record_memory_history, replays the trace to the moment of the most allocated
bytes and groups what was alive then by the operator that allocated it (the first C++ frame
outside the allocator, and the Python line). Tells whether eager needs the same peak as SplitSeg
(`peak_bytes` against splitseg-bench train's) and what the planner misses (cuDNN workspaces,
copies, the loss's buffers...).
"""
import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from peer_unet import build_from_state, load_state, loss_and_dice  # noqa: E402

# Frames that say nothing about who asked for the memory.
SKIP = ("CUDACachingAllocator", "c10::", "CachingAllocator", "at::empty", "at::detail::empty", "empty_cuda",
        "empty_generic", "at::TensorBase", "at::native::empty", "at::_ops::empty", "wrapper_CUDA", "c10::impl",
        "torch::autograd::VariableType", "torch::autograd::generated", "at::_ops::", "std::", "??", "_start",
        "__libc", "torch::autograd::Engine", "torch::autograd::Node", "torch::jit::", "_PyEval", "PyObject",
        "python", "cfunction",
        # The unwinder's own frames (the 2026-12-06 lease named every group torch::unwind::unwind()).
        "torch::unwind::", "torch::CapturedTraceback", "CapturedTraceback", "gather_with_cpp", "unwind")


def who(frames):
    """The first informative C++ frame and the first Python frame of peer_unet.py / this file."""
    cpp = next((f["name"] for f in frames
                if not f.get("filename", "").endswith(".py") and not any(s in f["name"] for s in SKIP)), "?")
    py = next((f"{Path(f['filename']).name}:{f['line']} {f['name']}" for f in frames
               if f.get("filename", "").endswith(".py") and "torch/" not in f["filename"]), "?")
    return cpp[:120], py


def replay(trace):
    """The most bytes alive at once in an allocator trace (alloc .. free_requested, as
    memory_allocated counts them) and the allocations alive then, by address."""
    live, cur, best, best_live = {}, 0, 0, {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            cur += e["size"]
            if cur > best:
                best, best_live = cur, dict(live)
        elif e["action"] == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])["size"]
    return best, best_live


def step(net, opt, x, target):
    opt.zero_grad(set_to_none=True)
    loss, _ = loss_and_dice(net(x), target)
    loss.backward()
    opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--base", type=int, default=32)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    dev = torch.device(a.device)
    state = load_state(a.state)
    net = build_from_state(state, a.base).to(dev).train()
    x, target = state["input"].to(dev), state["target"].to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(2):
        step(net, opt, x, target)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    baseline = torch.cuda.memory_allocated(dev)  # weights, Adam's moments, input: before the trace
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, context="alloc", stacks="all", device=dev)
    step(net, opt, x, target)
    torch.cuda.synchronize(dev)
    snap = torch.cuda.memory._snapshot(dev)
    torch.cuda.memory._record_memory_history(enabled=None)
    peak_allocator = torch.cuda.max_memory_allocated(dev)

    trace = snap["device_traces"][dev.index or 0]
    best, best_live = replay(trace)
    groups = defaultdict(lambda: [0, 0])
    blocks = []
    for e in best_live.values():
        cpp, py = who(e.get("frames", []))
        groups[(cpp, py)][0] += e["size"]
        groups[(cpp, py)][1] += 1
        blocks.append((e["size"], cpp, py))
    top = sorted(groups.items(), key=lambda kv: -kv[1][0])[:a.top]
    print(json.dumps({
        "tag": "peak_snapshot", "size": list(x.shape[2:]), "base": a.base, "device": str(dev),
        "peak_bytes": peak_allocator, "baseline_bytes": baseline, "traced_peak_bytes": best,
        "trace_events": len(trace),
        "groups": [{"bytes": b, "blocks": n, "op": cpp, "python": py} for (cpp, py), (b, n) in top],
        "largest_blocks": [{"bytes": s, "op": cpp, "python": py} for s, cpp, py in sorted(blocks, reverse=True)[:10]],
    }))


if __name__ == "__main__":
    main()
