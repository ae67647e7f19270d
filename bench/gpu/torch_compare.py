#!/usr/bin/env python3
"""carb's CUDA engine vs PyTorch eager (cuDNN) on the same architecture, batch and precision.

For each round, carb times every case in one bench_engine process (warm-up, then forward passes
for a fixed time; CUDA events around each pass and host wall time around run()+sync()), then
PyTorch times every case the same way: torchvision's resnet18/resnet50 (carb's basic18 and
bottleneck50 at width 1), eval mode, torch.inference_mode, cuDNN's heuristics
(torch.backends.cudnn.benchmark = False, as carb's default), fp32 without TF32 (carb's fp32 is
IEEE single precision), fp16 in NCHW and in channels_last (the faster counts). The medians of
the rounds are compared; carb / PyTorch <= 1.05 is issue 8's goal.

Usage: torch_compare.py --bench BUILD/bench/bench_engine [--out FILE.tsv] [--seconds S]
                        [--rounds R] [--resolution PX] [--batches 1,16,64]
Without PyTorch or without a GPU it says so and exits 0 (the check goes on).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = [("resnet18", "basic18"), ("resnet50", "bottleneck50")]
PRECISIONS = ["fp32", "fp16"]


def time_torch(model, batch, resolution, dtype, channels_last, seconds):
    import torch

    x = torch.rand(batch, 3, resolution, resolution, device="cuda") * 2 - 1
    x = x.to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    start_event = torch.cuda.Event(enable_timing=True)
    stop_event = torch.cuda.Event(enable_timing=True)
    wall, device = [], []
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        begin = time.perf_counter()
        while time.perf_counter() - begin < seconds or len(wall) < 10:
            before = time.perf_counter()
            start_event.record()
            model(x)
            stop_event.record()
            torch.cuda.synchronize()
            wall.append((time.perf_counter() - before) * 1e3)
            device.append(start_event.elapsed_time(stop_event))
    return statistics.median(wall), statistics.median(device)


def time_carb(bench, keys, seconds):
    """carb's medians by key; a key bench_engine could not run is missing (its error printed)."""
    run = subprocess.run([bench, "--device", "cuda:0", "--seconds", str(seconds)] + keys,
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        print(f"bench_engine exited {run.returncode}: {run.stderr.strip()}", flush=True)
    results = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row["key"]] = (row["median_ms"], row.get("device_median_ms"))
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--out")
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--resolution", type=int, default=128)
    parser.add_argument("--batches", default="1,16,64")
    args = parser.parse_args()
    try:
        import torch
        import torchvision
    except ImportError as error:
        print(f"torch_compare: PyTorch is not installed here ({error}); comparison skipped")
        return 0
    if not torch.cuda.is_available():
        print("torch_compare: PyTorch sees no GPU; comparison skipped")
        return 0
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    batches = [int(b) for b in args.batches.split(",")]
    cases = [(model, structure, precision, batch) for model, structure in CASES
             for precision in PRECISIONS for batch in batches]
    keys = [f"{structure}_w1_ds_r{args.resolution}_b{batch}_{precision}"
            for _, structure, precision, batch in cases]
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}; {args.rounds} rounds of {args.seconds} s per case, "
          f"carb and PyTorch alternating by round", flush=True)
    models = {}
    for name, _ in CASES:
        models[name] = getattr(torchvision.models, name)().eval().cuda()
    carb_rounds, torch_rounds = [], []
    for _ in range(args.rounds):
        carb_rounds.append(time_carb(args.bench, keys, args.seconds))
        measured = {}
        for key, (name, _, precision, batch) in zip(keys, cases):
            dtype = torch.float32 if precision == "fp32" else torch.float16
            model = models[name].to(dtype)
            best = None
            for channels_last in (False, True):
                model = model.to(memory_format=torch.channels_last if channels_last
                                 else torch.contiguous_format)
                timing = time_torch(model, batch, args.resolution, dtype, channels_last,
                                    args.seconds)
                if best is None or timing[0] < best[0]:
                    best = (timing[0], timing[1], "channels_last" if channels_last else "nchw")
            measured[key] = best
        torch_rounds.append(measured)

    header = ["key", "carb_wall_ms", "carb_device_ms", "torch_wall_ms", "torch_device_ms",
              "torch_layout", "wall_ratio", "device_ratio"]
    rows = []
    for key in keys:
        wall_values = [r[key][0] for r in carb_rounds if key in r]
        device_values = [r[key][1] for r in carb_rounds if key in r and r[key][1] is not None]
        carb_wall = statistics.median(wall_values) if wall_values else float("nan")
        carb_device = statistics.median(device_values) if device_values else float("nan")
        torch_wall = statistics.median(r[key][0] for r in torch_rounds)
        torch_device = statistics.median(r[key][1] for r in torch_rounds)
        layout = torch_rounds[-1][key][2]
        rows.append([key, carb_wall, carb_device, torch_wall, torch_device, layout,
                     carb_wall / torch_wall, carb_device / torch_device])
    print("\t".join(header))
    for row in rows:
        print("\t".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row))
    ratios = [row[6] for row in rows if row[6] == row[6]]  # NaN: carb could not run the key
    if ratios:
        print(f"carb/PyTorch wall-clock ratio over {len(ratios)} of {len(rows)} cases: geometric "
              f"mean {statistics.geometric_mean(ratios):.3f}, worst {max(ratios):.3f} "
              f"(goal <= 1.05)")
    else:
        print("carb ran none of the cases; see its errors above")
    if args.out:
        with open(args.out, "w") as out:
            out.write("\t".join(header) + "\n")
            for row in rows:
                out.write("\t".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                                    for v in row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
