"""Leave-one-family-out with kernel-level CARB models (bench/kernel_lofo.sh runs it).

    python3 bench/kernel_lofo.py OUT-DIR KERNELS.csv... [--train-only KERNELS.csv...]

KERNELS.csv are `carb kernels --format csv` outputs; OUT-DIR/families.txt maps an architecture
hash to its family ("graph-HASH NAME" per line; a ResNet of carb's space is "resnet-space").
Kernels of the files after --train-only (bench/kernel_campaign.py's chains) are in every
family's training set and never held out.
"""
import collections
import csv
import math
import os
import subprocess
import sys

import numpy as np

CARB = os.environ.get("CARB", "build/src/cli/carb")
TYPES = ["pw", "dense", "stem", "dw", "grouped", "fc", "max_pool", "avg_pool", "global_avg_pool",
         "batch_norm", "eltwise", "add", "mul", "concat", "channel_shuffle", "slice", "step"]
ACTIVATIONS = {"relu", "clip", "sigmoid", "hard_sigmoid", "hard_swish", "swish"}


def kernel_type(row):
    kind = row["kind"]
    if row["kernel"].endswith(")"):
        return "step"  # an activation's eltwise step after its op
    if kind == "conv":
        return {"conv_stem": "stem", "conv_depthwise": "dw", "conv_grouped": "grouped"}.get(
            row["class"], "pw" if row["window"] == "1" else "dense")
    return "eltwise" if kind in ACTIVATIONS else kind


def dims(text):
    return [int(x) for x in text.split("x")]


def kernel_table(paths, families, default_family="resnet-space"):
    """One row of numeric features per kernel."""
    table = []
    for path in paths:
        for row in csv.DictReader(open(path)):
            inputs = [dims(s) for s in row["input_shape"].split("+")]
            out = dims(row["output_shape"])
            in_bytes = sum(math.prod(s) for s in inputs) * 4
            out_bytes = math.prod(out) * 4
            weight_bytes = int(row["params"]) * 4
            macs = int(row["macs"])
            groups = int(row["groups"])
            t = kernel_type(row)
            prefix = row["key"].split("_r")[0]
            table.append({
                "key": row["key"], "family": families.get(prefix, default_family),
                "pass_ms": row["pass_ms"], "median_ms": row["median_ms"], "macs": macs,
                "in_bytes": in_bytes, "out_bytes": out_bytes, "weight_bytes": weight_bytes,
                "batch": out[0], "cin": inputs[0][1], "cout": out[1],
                "in_hw": inputs[0][2] * inputs[0][3], "out_hw": out[2] * out[3],
                "window": row["window"], "stride": row["stride"], "groups": groups,
                "chan_per_group": inputs[0][1] // groups, "inputs": len(inputs),
                "macs_per_byte": macs / (in_bytes + out_bytes + weight_bytes),
                **{"is_" + name: int(t == name) for name in TYPES},
                # The activation fused into it (the kernel's name ends "+swish", ...): a swish
                # post-op costs a depthwise conv 2-4 times a ReLU.
                **{"fused_" + a: int(row["kernel"].split("+")[-1].split("(")[0] == a
                                     and "+" in row["kernel"]) for a in sorted(ACTIVATIONS)}})
    return table


def write(path, rows):
    with open(path, "w") as f:
        writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def main():
    out = sys.argv[1]
    args = sys.argv[2:]
    train_only = args[args.index("--train-only") + 1:] if "--train-only" in args else []
    measured = args[:len(args) - len(train_only) - (1 if train_only else 0)]
    families = dict(line.split() for line in open(os.path.join(out, "families.txt")))
    table = kernel_table(measured, families) + kernel_table(train_only, {}, "synthetic")
    features = ",".join(list(table[0])[4:])
    passes = {r["key"]: float(r["pass_ms"]) for r in table}
    sums = collections.defaultdict(float)
    for r in table:
        sums[r["key"]] += float(r["median_ms"])
    ratio = np.array([sums[k] / passes[k] for k in passes])
    print("kernels run one at a time / whole pass over %d configurations: median %.3f, "
          "5-95%% %.3f-%.3f" % (len(ratio), np.median(ratio), np.percentile(ratio, 5),
                               np.percentile(ratio, 95)))
    errors = []
    print("held-out family, configurations, latency MAPE, within +-10%, median error")
    for held in sorted({r["family"] for r in table} - {"resnet-space", "synthetic"}):
        train = [r for r in table if r["family"] != held]
        test = [r for r in table if r["family"] == held]
        write(f"{out}/train-{held}.csv", train)
        write(f"{out}/test-{held}.csv", test)
        model = f"{out}/model-{held}.json"
        subprocess.run([CARB, "fit", "--table", f"{out}/train-{held}.csv", "--features", features,
                        "--target", "latency=median_ms", "--batch-column", "batch", "--seed", "1",
                        "-o", model] + os.environ.get("FIT_ARGS", "--prior none").split(),
                       check=True, capture_output=True)
        predicted = subprocess.run(
            [CARB, "predict", "--model", model, "--table", f"{out}/test-{held}.csv", "--format",
             "csv"], check=True, capture_output=True, text=True).stdout.strip().split("\n")[1:]
        scale = math.exp(np.median([math.log(passes[k] / sums[k]) for k in
                                    {r["key"] for r in train}]))
        total = collections.defaultdict(float)
        for r, line in zip(test, predicted):
            total[r["key"]] += float(line.split(",")[1])
        e = np.array([scale * total[k] / passes[k] - 1 for k in total])
        errors += list(e)
        print("%s, %d, %.1f%%, %.0f%%, %+.2f" % (held, len(e), 100 * np.mean(np.abs(e)),
                                               100 * np.mean(np.abs(e) <= 0.1), np.median(e)))
    e = np.array(errors)
    print("all, %d, %.1f%%, %.0f%%, median absolute %.1f%%" % (
        len(e), 100 * np.mean(np.abs(e)), 100 * np.mean(np.abs(e) <= 0.1),
        100 * np.median(np.abs(e))))


if __name__ == "__main__":
    main()
