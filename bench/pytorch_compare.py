#!/usr/bin/python3
"""carb's CPU engine vs PyTorch eager on the same architecture, batch and threads, side by side.

For each configuration, alternately: carb (bench_engine, one process per round) and PyTorch
(torchvision's resnet18/resnet50, eval mode, inference_mode, fp32), each timed for the same number
of seconds after a warm-up; the medians of the rounds are compared. PyTorch is timed in its two
eager CPU paths and the fastest one counts: plain NCHW tensors (Debian's torch 1.13 then runs most
convolutions through _slow_conv2d, im2col + generic BLAS), channels-last tensors (model and input
in torch.channels_last, which ATen sends to oneDNN) and torch.utils.mkldnn.to_mkldnn (the model
and input as oneDNN tensors: oneDNN 2.6.3, the library carb uses). Needs Debian's
python3-torch and python3-torchvision (/usr/bin/python3).

With --zoo DIR it compares torchvision's other families instead (docs/onnx.md): carb runs each
model's ONNX export DIR/<name>-bn.onnx (scripts/onnx_zoo.py, what the zoo campaign measures) and
PyTorch the torchvision model it was exported from, at 224 px, batches 1 and 8. Where PyTorch's
mkldnn path cannot run a model (an operator without an mkldnn kernel) its column says so and the
NCHW path counts.

With --device torch:0 carb's PyTorch backend (docs/torch.md: ATen's eager operators called from
C++ over carb's IR) takes carb's engine's place, and the last column is its latency over PyTorch's
NCHW path, the ATen operators it calls: what carb's PyTorch measurements say a torchvision model
costs when a user runs it from Python. The backend pins glibc's malloc thresholds (docs/torch.md),
so this script runs PyTorch with the same ones (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_),
as a long-running Python process converges to them.

Usage: bench/pytorch_compare.py BUILD_DIR [--seconds S] [--rounds R] [--device ID]
                                [--zoo DIR [--only M,...]]
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

ZOO = ["mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "regnet_x_400mf",
       "resnext50_32x4d", "densenet121", "shufflenet_v2_x1_0", "mnasnet1_0", "vgg11",
       "squeezenet1_1", "resnet50"]
CASES = [  # (torchvision model, carb structure)
    ("resnet18", "basic18"),
    ("resnet50", "bottleneck50"),
]
RESOLUTIONS = [64, 224]
BATCHES = [1, 8]


def time_torch(model, batch, resolution, seconds, layout):
    x = torch.rand(batch, 3, resolution, resolution) * 2 - 1
    if layout == "mkldnn":
        x = x.to_mkldnn()
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
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


def time_carb(bench, key, seconds, onnx=None, device="cpu:0"):
    command = [bench, "--device", device, "--seconds", str(seconds)] + \
        (["--onnx", onnx] if onnx else []) + [key]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])["median_ms"]


def onnx_key(build_dir, onnx, resolution, batch):
    """The configuration key carb gives an export at a resolution and batch."""
    carb = os.path.join(build_dir, "src", "cli", "carb")
    out = subprocess.run([carb, "space", "show", "--onnx", onnx, "--resolution", str(resolution),
                          "--batch", str(batch), "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)[0]["key"]


def cases(args):
    """(label, torchvision name, per resolution and batch: carb key, carb's --onnx file)."""
    if not args.zoo:
        for name, structure in CASES:
            for resolution in RESOLUTIONS:
                for batch in BATCHES:
                    key = f"{structure}_w1_ds_r{resolution}_b{batch}_fp32"
                    yield key, name, resolution, batch, key, None
        return
    for name in ZOO:
        if args.only and name not in args.only.split(","):
            continue
        onnx = os.path.join(args.zoo, f"{name}-bn.onnx")
        for batch in BATCHES:
            key = onnx_key(args.build_dir, onnx, 224, batch)
            yield f"{name} 224 px b{batch}", name, 224, batch, key, onnx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--zoo", help="directory of scripts/onnx_zoo.py's exports")
    parser.add_argument("--only", help="with --zoo: these models only (comma-separated)")
    parser.add_argument("--device", default="cpu:0",
                        help="carb's device: cpu:0 (its oneDNN engine) or torch:0")
    args = parser.parse_args()
    torch_backend = args.device.startswith("torch")
    pinned = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}
    if torch_backend and any(os.environ.get(k) != v for k, v in pinned.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **pinned})
    bench = os.path.join(args.build_dir, "bench", "bench_engine")
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()}), "
          f"{threads} threads; {args.rounds} rounds of {args.seconds} s each, alternating")
    print(f"{'configuration':36} {args.device + ' ms':>11} {'nchw ms':>9} {'cl ms':>9} "
          f"{'mkldnn ms':>9} {'/nchw' if torch_backend else '/best':>10}")
    ratios = []
    models = {}
    for label, name, resolution, batch, key, onnx in cases(args):
        if name not in models:
            model = getattr(torchvision.models, name)().eval()
            channels_last = getattr(torchvision.models, name)().eval().to(
                memory_format=torch.channels_last)
            try:
                converted = mkldnn.to_mkldnn(getattr(torchvision.models, name)().eval())
                time_torch(converted, 1, resolution, 0, "mkldnn")
            except Exception as error:  # pylint: disable=broad-except (an op without a kernel)
                converted = None
                print(f"{name}: no mkldnn path ({str(error).splitlines()[0][:80]})", flush=True)
            models[name] = (model, channels_last, converted)
        model, channels_last, mkldnn_model = models[name]
        carb_ms, nchw_ms, cl_ms, mkldnn_ms = [], [], [], []
        for _ in range(args.rounds):
            carb_ms.append(time_carb(bench, key, args.seconds, onnx, args.device))
            nchw_ms.append(time_torch(model, batch, resolution, args.seconds, "nchw"))
            cl_ms.append(time_torch(channels_last, batch, resolution, args.seconds,
                                    "channels_last"))
            if mkldnn_model is not None:
                mkldnn_ms.append(time_torch(mkldnn_model, batch, resolution, args.seconds,
                                            "mkldnn"))
        c, n, l = (statistics.median(v) for v in (carb_ms, nchw_ms, cl_ms))
        m = statistics.median(mkldnn_ms) if mkldnn_ms else float("inf")
        against = n if torch_backend else min(n, l, m)
        ratios.append(c / against)
        m_text = f"{m:9.3f}" if mkldnn_ms else f"{'-':>9}"
        print(f"{label:36} {c:11.3f} {n:9.3f} {l:9.3f} {m_text} {c / against:10.3f}", flush=True)
    what = f"{args.device}/torch nchw" if torch_backend else "carb/best torch"
    print(f"geometric mean {what}: {statistics.geometric_mean(ratios):.3f}; "
          f"range {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
