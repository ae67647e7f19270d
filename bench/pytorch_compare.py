#!/usr/bin/python3
"""carb's CPU engine vs PyTorch eager on the same architecture, batch and threads, side by side.

For each configuration, alternately: carb (bench_engine, one process per round) and PyTorch
(torchvision's resnet18/resnet50, eval mode, inference_mode, fp32), each timed for the same number
of seconds after a warm-up; the medians of the rounds are compared. PyTorch is timed in its two
eager CPU paths and the faster one counts: plain NCHW tensors (Debian's torch 1.13 then runs most
convolutions through _slow_conv2d, im2col + generic BLAS) and torch.utils.mkldnn.to_mkldnn (the
model and input as oneDNN tensors: oneDNN 2.6.3, the library carb uses). Needs Debian's
python3-torch and python3-torchvision (/usr/bin/python3).

Usage: bench/pytorch_compare.py BUILD_DIR [--seconds S] [--rounds R]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torchvision
from torch.utils import mkldnn

CASES = [  # (torchvision model, carb structure)
    ("resnet18", "basic18"),
    ("resnet50", "bottleneck50"),
]
RESOLUTIONS = [64, 224]
BATCHES = [1, 8]


def time_torch(model, batch, resolution, seconds, to_mkldnn):
    x = torch.rand(batch, 3, resolution, resolution) * 2 - 1
    if to_mkldnn:
        x = x.to_mkldnn()
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        samples = []
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or len(samples) < 10:
            before = time.perf_counter()
            model(x)
            samples.append((time.perf_counter() - before) * 1e3)
    return statistics.median(samples)


def time_carb(bench, key, seconds):
    out = subprocess.run([bench, "--seconds", str(seconds), key], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])["median_ms"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bench = os.path.join(args.build_dir, "bench", "bench_engine")
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()}), "
          f"{threads} threads; {args.rounds} rounds of {args.seconds} s each, alternating")
    print(f"{'configuration':36} {'carb ms':>9} {'nchw ms':>9} {'mkldnn ms':>9} {'carb/best':>10}")
    ratios = []
    for name, structure in CASES:
        model = getattr(torchvision.models, name)().eval()
        mkldnn_model = mkldnn.to_mkldnn(getattr(torchvision.models, name)().eval())
        for resolution in RESOLUTIONS:
            for batch in BATCHES:
                key = f"{structure}_w1_ds_r{resolution}_b{batch}_fp32"
                carb_ms, nchw_ms, mkldnn_ms = [], [], []
                for _ in range(args.rounds):
                    carb_ms.append(time_carb(bench, key, args.seconds))
                    nchw_ms.append(time_torch(model, batch, resolution, args.seconds, False))
                    mkldnn_ms.append(time_torch(mkldnn_model, batch, resolution, args.seconds, True))
                c = statistics.median(carb_ms)
                n, m = statistics.median(nchw_ms), statistics.median(mkldnn_ms)
                ratios.append(c / min(n, m))
                print(f"{key:36} {c:9.3f} {n:9.3f} {m:9.3f} {c / min(n, m):10.3f}", flush=True)
    print(f"geometric mean carb/best torch: {statistics.geometric_mean(ratios):.3f}; "
          f"worst: {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
