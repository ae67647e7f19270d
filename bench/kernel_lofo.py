"""Leave-one-family-out with carb's kernel model (bench/kernel_lofo.sh runs it).

    python3 bench/kernel_lofo.py OUT-DIR KERNELS.csv... [--train-only KERNELS.csv...] [--by-kind]
        [--retimed KERNELS.csv...]

KERNELS.csv are `carb kernels --format csv` outputs; OUT-DIR/families.txt maps an architecture
hash to its family ("graph-HASH NAME" per line; a ResNet of carb's space is "resnet-space"), and
OUT-DIR/zoo.yaml and zoo-vgg.yaml import the families' model files. Per held-out family, `carb
fit --kernels` fits a kernel model on every other family's kernels (and those after
--train-only, bench/kernel_campaign.py's chains, never held out), and `carb predict` predicts the
family's configurations by summing their planned kernels; each is scored against its measured
whole pass: MAPE, the share within +-10%, the coverage of the 90% intervals and their median
width (high / low). Where the timings carry a drift probe (`carb kernels`' probe_ms) and the
model was fitted divided by it, the measured pass is divided by the same drift (its probe_ms
over the model's reference_ms): the model predicts the device at one speed, and is scored there;
SCORE=raw scores it against the passes as measured instead.

With --by-kind, it also says where each held-out family's error comes from: the model prices
every kernel of the family's configurations on its own (`carb predict --table`), and per kind
of kernel (its is_ column, its fused activation, "(step)" for a kernel of a split step) it
prints the kind's share of the family's measured time (a kernel's share of its measured pass)
and its predicted / measured time, the 8 largest kinds.

With --retimed, files of the same configurations timed again (another run of the same `carb
kernels` command) are never fitted on: each held-out configuration is scored against the median
of its timings (the mean of two), each at the model's speed, so that a single timing's noise
weighs less in the score; it also prints how far apart the timings were.

Where the timings carry a probe, it prints each file's probe range first.
"""
import collections
import csv
import json
import os
import subprocess
import sys

import numpy as np

CARB = os.environ.get("CARB", "build/src/cli/carb")


def family_of(key, families):
    return families.get(key.split("_r")[0], "resnet-space")


def kind_of(row, header):
    """A kernel's kind for --by-kind: its is_ column, its fused activation, whether a step."""
    kind = next((c[3:] for c in header if c.startswith("is_") and row[c] == "1"), "?")
    act = next((c[6:] for c in header if c.startswith("fused_") and row[c] == "1"), "")
    return kind + ("+" + act if act else "") + ("(step)" if row["kernel"].endswith(")") else "")


def by_kind(out, held, model, header, rows, scale):
    """Prints the held-out family's measured share and predicted / measured time per kind of
    kernel; `scale` takes a row's measured time to the model's speed."""
    table = f"{out}/kernels-{held}.csv"
    with open(table, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    predicted = subprocess.run([CARB, "predict", "--model", model, "--table", table, "--format",
                                "csv"], check=True, capture_output=True, text=True).stdout
    measured, priced = collections.Counter(), collections.Counter()
    for row, p in zip(rows, csv.DictReader(predicted.splitlines())):
        r = dict(zip(header, row))
        kind = kind_of(r, header)
        measured[kind] += float(r["share"]) * float(r["pass_ms"]) * scale(r)
        priced[kind] += float(p["latency_ms"])
    total = sum(measured.values())
    print("  by kind: kernels' sum / measured %.2f" % (sum(priced.values()) / total))
    for kind in sorted(measured, key=lambda k: -measured[k])[:8]:
        print("    %s, share %.2f, predicted / measured %.2f" % (
            kind, measured[kind] / total, priced[kind] / measured[kind]))


def retimings(paths, passes):
    """Per configuration of `passes`, its (pass_ms, probe_ms) in each file of `paths` (another
    timing of the same configurations); prints how far they lie from the first timing."""
    again = {k: [] for k in passes}
    for path in paths:
        with open(path) as f:  # a configuration's rows (its kernels) carry its pass alike
            timed = {r["key"]: (float(r["pass_ms"]),
                                float(r["probe_ms"]) if r.get("probe_ms") else None)
                     for r in csv.DictReader(f) if r["key"] in again}
        for k, timing in timed.items():
            again[k].append(timing)
    ratios = [ms / passes[k] for k, timings in again.items() for ms, _ in timings]
    if paths:
        if not ratios:
            sys.exit("kernel_lofo.py: the --retimed files hold none of the scored configurations")
        ratios = np.array(ratios)
        print("timed again: %d configurations, again / first %.3f (geometric mean), within "
              "+-10%% of each other %.0f%%" % (len(ratios), np.exp(np.mean(np.log(ratios))),
                                               100 * np.mean(np.abs(ratios - 1) <= 0.1)))
    return again


def print_probe_ranges(paths):
    """Each timing file's probe latency range, where it has a probe."""
    for path in paths:
        with open(path) as f:
            values = [float(r["probe_ms"]) for r in csv.DictReader(f) if r.get("probe_ms")]
        if values:
            print("probe in %s: %.3f-%.3f ms (%.2fx), median %.3f ms" % (
                path, min(values), max(values), max(values) / min(values), np.median(values)))


def main():
    out = sys.argv[1]
    args = sys.argv[2:]
    show_kinds = "--by-kind" in args
    args = [a for a in args if a != "--by-kind"]
    retimed = args[args.index("--retimed") + 1:] if "--retimed" in args else []
    args = args[:len(args) - len(retimed) - (1 if retimed else 0)]
    train_only = args[args.index("--train-only") + 1:] if "--train-only" in args else []
    measured = args[:len(args) - len(train_only) - (1 if train_only else 0)]
    families = dict(line.split() for line in open(os.path.join(out, "families.txt")))
    header, rows = None, []
    for path in measured:
        with open(path) as f:
            reader = csv.reader(f)
            header = next(reader)
            rows += list(reader)
    key = header.index("key")
    passes = {r[key]: float(r[header.index("pass_ms")]) for r in rows}
    probe = header.index("probe_ms") if "probe_ms" in header else None
    probe_ms = {r[key]: float(r[probe]) for r in rows if probe is not None and r[probe]}
    again = retimings(retimed, passes)
    print_probe_ranges(measured + train_only)
    errors, covered, widths = [], [], []
    print("held-out family, configurations, latency MAPE, within +-10%, median error, "
          "90% interval coverage, median high / low")
    for held in sorted({family_of(k, families) for k in passes} - {"resnet-space"}):
        train = f"{out}/train-{held}.csv"
        with open(train, "w") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(r for r in rows if family_of(r[key], families) != held)
        model = f"{out}/model-{held}.json"
        subprocess.run([CARB, "fit", "--kernels", train, *train_only, "--seed", "1", "-o", model]
                       + os.environ.get("FIT_ARGS", "").split(), check=True, capture_output=True)
        drift = json.load(open(model)).get("drift")
        if os.environ.get("SCORE") == "raw":
            drift = None
        measured_at = {k: np.median([ms * (drift["reference_ms"] / p if drift else 1)
                                     for ms, p in [(passes[k], probe_ms.get(k))] + again[k]
                                     if p or not drift])
                       for k in passes}
        keys = sorted(k for k in passes if family_of(k, families) == held)
        spec = f"{out}/zoo-vgg.yaml" if held == "vgg11" else f"{out}/zoo.yaml"
        predicted = subprocess.run(
            [CARB, "predict", "--model", model, "--spec", spec, "--format", "csv", *keys],
            check=True, capture_output=True, text=True).stdout.strip().split("\n")[1:]
        e, inside, width = [], [], []
        for line in predicted:
            k, _, value, low, high = line.split(",")
            e.append(float(value) / measured_at[k] - 1)
            inside.append(float(low) <= measured_at[k] <= float(high))
            width.append(float(high) / float(low))
        e = np.array(e)
        errors += list(e)
        covered += inside
        widths += width
        print("%s, %d, %.1f%%, %.0f%%, %+.2f, %.0f%%, %.2f" % (
            held, len(e), 100 * np.mean(np.abs(e)), 100 * np.mean(np.abs(e) <= 0.1),
            np.median(e), 100 * np.mean(inside), np.median(width)))
        if show_kinds:
            by_kind(out, held, model, header,
                    [r for r in rows if family_of(r[key], families) == held],
                    lambda r: drift["reference_ms"] / float(r["probe_ms"]) if drift else 1)
    e = np.array(errors)
    print("all, %d, %.1f%%, %.0f%%, median absolute %.1f%%, %.0f%%, %.2f" % (
        len(e), 100 * np.mean(np.abs(e)), 100 * np.mean(np.abs(e) <= 0.1),
        100 * np.median(np.abs(e)), 100 * np.mean(covered), np.median(widths)))


if __name__ == "__main__":
    main()
