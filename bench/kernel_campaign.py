#!/usr/bin/python3
"""A kernel campaign of its own, as nn-Meter's: random chains of every kernel kind with every
activation, exported to ONNX, for `carb kernels` to time (bench/kernel_lofo.sh runs it).

    /usr/bin/python3 bench/kernel_campaign.py OUT-DIR [--models N] [--seed S] [--preact]

writes OUT-DIR/chain-vV-S-I.onnx (generator version V, seed S, chain I; batch norms kept, opset
13; weights random, nothing downloaded) and OUT-DIR/synthetic.yaml, a spec of those files at
resolutions 64-224 x batches 1-16. With --preact, chain-pV-S-I.onnx and preact.yaml: chains in
which three blocks in ten are pre-activation convolutions (a batch norm and an activation, not
fused into any conv, before a 1x1 or 3x3 conv), the stand-alone batch norms that DenseNet and
pre-activation ResNets run and no other chain has; the other chains are drawn as without it.

Each chain is a stem, 4-9 random blocks and a classifier (sometimes with a hidden layer): dense,
pointwise, depthwise (3, 5, 7) and grouped (4-64 channels a group) convolutions, each with a
batch norm and one of ReLU, ReLU6, hard-swish, SiLU or none; squeeze-excite with a sigmoid or
hard-sigmoid gate; inverted residuals (Add), Concat, channel shuffles, max and average pools.
Channels (up to 64 x 2^downsamplings, at most 1,280) and strides are drawn from generic ranges,
not from any torchvision family, so no held-out family's shapes leak into the training kernels.
Idempotent: a file already there is kept.
"""

import argparse
import os
import random
import sys
import warnings

ACTIVATIONS = ["relu", "relu6", "hardswish", "silu", "none"]
RESOLUTIONS = [64, 112, 160, 224]
VERSION = 3  # of the chains' generator, in their file names (2: a draft, dropped)
BATCHES = [1, 2, 4, 8, 16]


def build(torch, rng, preact=False):
    """One random chain as an nn.Module (eval mode); with `preact`, three blocks in ten are
    pre-activation convolutions."""
    from torch import nn

    def act(name):
        return {"relu": nn.ReLU(), "relu6": nn.ReLU6(), "hardswish": nn.Hardswish(),
                "silu": nn.SiLU(), "none": nn.Identity()}[name]

    def conv_bn(cin, cout, k, stride, groups=1, activation=None):
        activation = activation or rng.choice(ACTIVATIONS)
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), act(activation))

    class SqueezeExcite(nn.Module):
        def __init__(self, c):
            super().__init__()
            inner = max(8, c // 4)
            self.reduce = nn.Conv2d(c, inner, 1)
            self.expand = nn.Conv2d(inner, c, 1)
            self.inner = act(rng.choice(["relu", "silu"]))
            self.gate = rng.choice([nn.Sigmoid(), nn.Hardsigmoid()])

        def forward(self, x):
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.expand(self.inner(self.reduce(s))))

    class Residual(nn.Module):  # an inverted residual: pointwise, depthwise, pointwise, Add
        def __init__(self, c, expansion):
            super().__init__()
            e = c * expansion
            self.body = nn.Sequential(conv_bn(c, e, 1, 1), conv_bn(e, e, rng.choice([3, 5]), 1, e),
                                      conv_bn(e, c, 1, 1, activation="none"))

        def forward(self, x):
            return x + self.body(x)

    class Concat(nn.Module):  # a dense block's growth
        def __init__(self, c, growth):
            super().__init__()
            self.branch = conv_bn(c, growth, 3, 1)

        def forward(self, x):
            return torch.cat((x, self.branch(x)), 1)

    class Shuffle(nn.Module):  # shufflenet's: half passes, half is convolved, then shuffled
        def __init__(self, c):
            super().__init__()
            h = c // 2
            self.branch = nn.Sequential(conv_bn(h, h, 1, 1), conv_bn(h, h, 3, 1, h, "none"),
                                        conv_bn(h, h, 1, 1))

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            x = torch.cat((a, self.branch(b)), 1)
            n, c, hh, w = x.size()
            return x.view(n, 2, c // 2, hh, w).transpose(1, 2).contiguous().view(n, c, hh, w)

    c = rng.choice([8, 16, 24, 32])
    layers = [conv_bn(3, c, rng.choice([3, 5, 7]), 2)]
    downsamples = 1

    def cap(channels):  # as networks widen when they downsample: 128 at 1/2 ... 1280 at 1/16
        return max(8, min(1280, 64 << downsamples, channels) // 8 * 8)

    for _ in range(rng.randint(4, 9)):
        kind = rng.choice(["dense", "pw", "dw", "grouped", "se", "residual", "concat", "shuffle",
                           "max_pool", "avg_pool"])
        if preact and rng.random() < 0.3:
            kind = "preact"
        stride = 2 if downsamples < 5 and rng.random() < 0.3 else 1
        if kind in ("max_pool", "avg_pool") and downsamples >= 5:
            kind = "pw"
        if kind == "dense":
            cout = cap(c * stride * rng.choice([1, 2]))
            layers.append(conv_bn(c, cout, rng.choice([3, 5]), stride))
        elif kind == "pw":
            cout = cap(int(c * rng.choice([0.5, 1, 2, 4, 6])))
            layers.append(conv_bn(c, cout, 1, 1))
            stride = 1
        elif kind == "dw":
            cout = c
            layers.append(conv_bn(c, c, rng.choice([3, 5, 7]), stride, c))
        elif kind == "preact":  # a batch norm and an activation before the conv, unfused
            cout = cap(c * stride * rng.choice([1, 2]))
            k = rng.choice([1, 3])
            layers.append(nn.Sequential(nn.BatchNorm2d(c), act(rng.choice(ACTIVATIONS)),
                                        nn.Conv2d(c, cout, k, stride, k // 2, bias=False)))
        elif kind == "grouped":
            width = rng.choice([w for w in (4, 8, 16, 32, 64) if c % w == 0] or [c])
            cout = c * stride
            layers.append(conv_bn(c, cout, 3, stride, c // width))
        else:
            stride = 1
            cout = c
            if kind == "se":
                layers.append(SqueezeExcite(c))
            elif kind == "residual":
                layers.append(Residual(c, cap(c * rng.choice([2, 4, 6])) // c or 1))
            elif kind == "concat":
                growth = rng.choice([16, 32])
                layers.append(Concat(c, growth))
                cout = c + growth
            elif kind == "shuffle":
                layers.append(Shuffle(c))
            else:
                layers.append(nn.MaxPool2d(3, 2, 1) if kind == "max_pool" else nn.AvgPool2d(2, 2))
                stride = 2
        downsamples += stride == 2
        c = cout
    classes = rng.choice([10, 100, 1000])
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    if rng.random() < 0.3:  # a classifier with a hidden layer, as vgg's and mobilenet_v3's
        hidden = rng.choice([1024, 2048, 4096])
        head += [nn.Linear(c, hidden), nn.ReLU()]
        c = hidden
    head = nn.Sequential(*head, nn.Linear(c, classes))
    return nn.Sequential(*layers, head).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--models", type=int, default=200, help="how many chains (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="of the chains' draw (default 1)")
    parser.add_argument("--preact", action="store_true",
                        help="chains with pre-activation convolutions (a stand-alone batch norm "
                        "and activation before the conv, as DenseNet's), in chain-pV-S-I.onnx "
                        "and preact.yaml")
    args = parser.parse_args()
    import torch

    # PRESERVE with constant folding warns for every export; the zoo's exports do the same.
    warnings.filterwarnings("ignore", message="It is recommended that constant folding")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from onnx_zoo import export

    out = os.path.abspath(args.out_dir)
    os.makedirs(out, exist_ok=True)
    paths = []
    for i in range(args.models):
        kind = "p" if args.preact else "v"
        path = os.path.join(out, f"chain-{kind}{VERSION}-{args.seed}-{i}.onnx")
        paths.append(path)
        if os.path.exists(path):
            continue
        rng = random.Random(args.seed * 100003 + i)
        torch.manual_seed(i)
        model = build(torch, rng, args.preact)
        export(torch, model, torch.randn(1, 3, 64, 64), path, "bn", 13)
    name = "preact" if args.preact else "synthetic"
    with open(os.path.join(out, f"{name}.yaml"), "w") as f:
        f.write(f"name: {name}\nmodels:\n")
        f.writelines(f"  - {p}\n" for p in paths)
        f.write(f"resolution: {RESOLUTIONS}\nbatch: {BATCHES}\n")
    print(f"kernel_campaign: {len(paths)} chains in {out}")


if __name__ == "__main__":
    main()
