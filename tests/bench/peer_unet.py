"""The seed 3D U-Net as a researcher writes it in PyTorch eager, parameter for parameter the
same as core/model/UNet3d (names included), so weights exported by splitseg-bench load as-is.

Shared by peer_train.py and peer_infer.py; also the reference loss (soft Dice + BCE) of
core/engine/Loss.cpp, so both sides optimise the same objective.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_block(cin, cout):
    # Same order and in-place ReLU as UNet3d.cpp's addConvBlock (norm "none").
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv3d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))


class Stage(nn.Module):
    def __init__(self, kind, cin, cout, pool=False, dropout=0.0):
        super().__init__()
        self.kind, self.pool, self.p = kind, pool, dropout
        if kind == "head":
            self.head = nn.Conv3d(cin, cout, 1)
            return
        conv_in = cin
        if kind == "dec":
            self.up = nn.ConvTranspose3d(cin, cout, 2, stride=2)
            conv_in = 2 * cout
        self.convs = conv_block(conv_in, cout)

    def forward(self, x, skip=None):
        if self.kind == "head":
            return self.head(x)
        if self.kind == "dec":
            x = torch.cat([self.up(x), skip], 1)
        elif self.pool:
            x = F.max_pool3d(x, 2)
            if self.p > 0:
                x = F.dropout(x, self.p, self.training)
        return self.convs(x)


class UNet3d(nn.Module):
    def __init__(self, base=32, depth=5, cin=1, cout=1, dropout=(0.5, 0.5, 0.3, 0.3)):
        super().__init__()
        drop = list(dropout)[: depth - 1]
        drop += [drop[-1] if drop else 0.0] * (depth - 1 - len(drop))
        ch = lambda l: base << l  # noqa: E731
        self.depth = depth
        for l in range(depth - 1):
            i = cin if l == 0 else ch(l - 1)
            setattr(self, f"enc{l}", Stage("enc", i, ch(l), l > 0, drop[l - 1] if l > 0 else 0.0))
        self.bottleneck = Stage("enc", ch(depth - 2), ch(depth - 1), True, drop[depth - 2])
        for l in range(depth - 2, -1, -1):
            setattr(self, f"dec{l}", Stage("dec", ch(l + 1), ch(l)))
        self.head = Stage("head", ch(0), cout)

    def forward(self, x):
        skips = []
        for l in range(self.depth - 1):
            x = getattr(self, f"enc{l}")(x)
            skips.append(x)
        x = self.bottleneck(x)
        for l in range(self.depth - 2, -1, -1):
            x = getattr(self, f"dec{l}")(x, skips[l])
        return self.head(x)


def load_state(path):
    # torch::pickle_save tags the typed Dict<string, Tensor> with restore_type_tag: a harmless
    # helper, allowed explicitly so loading stays weights_only.
    import torch.jit._pickle as jit_pickle
    with torch.serialization.safe_globals([jit_pickle.restore_type_tag]):
        return torch.load(path, map_location="cpu", weights_only=True)


def build_from_state(state, base):
    net = UNet3d(base=base)
    params = {k[len("param."):]: v for k, v in state.items() if k.startswith("param.")}
    missing = set(dict(net.named_parameters())) - set(params)
    if missing:
        raise SystemExit(f"state lacks parameters {sorted(missing)[:5]}")
    net.load_state_dict(params, strict=True)
    return net


def loss_and_dice(logits, target):
    """Soft Dice + BCE for one foreground class, as core/engine/Loss.cpp (plus the hard Dice metric)."""
    t = (target == 1).float().unsqueeze(1)
    probs = torch.sigmoid(logits)
    dims = (2, 3, 4)
    inter = (probs * t).sum(dims)
    denom = probs.sum(dims) + t.sum(dims)
    smooth = 1e-5
    loss = 1.0 - ((2.0 * inter + smooth) / (denom + smooth)).mean()
    loss = loss + F.binary_cross_entropy_with_logits(logits, t)
    with torch.no_grad():
        p, tt = (logits[:, 0] > 0), (target == 1)
        den = p.sum().item() + tt.sum().item()
        dice = 1.0 if den == 0 else 2.0 * (p & tt).sum().item() / den
    return loss, dice


def allocator():
    """Which malloc this process runs on: what LD_PRELOAD put in front, else glibc (and its settings)."""
    pre = os.environ.get("LD_PRELOAD", "")
    if "jemalloc" in pre:
        return "jemalloc " + os.environ.get("MALLOC_CONF", "(defaults)")
    tuned = [k for k in os.environ if k.startswith("MALLOC_") and k.endswith("_")]
    return ("glibc, " + " ".join(f"{k}={os.environ[k]}" for k in sorted(tuned))) if tuned else "glibc"
