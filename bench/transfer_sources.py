"""What a second source device is worth to a transfer: AMD -> Intel from 16 rows, from one source
model or from two (docs/benchmarks.md, "Two sources").

    python3 bench/transfer_sources.py [OUT-DIR (out/bench-transfer)] [--draws 20] [--k 16]

OUT-DIR is bench/transfer.sh's: its unpacked campaigns and its AMD source model (amd.json; run
`KS=16 CASES=amd-intel bash bench/transfer.sh OUT-DIR` first). The second source is carb's engine
on another Intel host (the engine campaign's carb rows, engines-carb.sqlite), fitted here as
sapphire.json when missing. The target is the Intel rounds campaign: each configuration's latency
is the median of its rounds, each divided by its drift (`carb export`'s drift_probe_ms over their
median). Per draw, K target configurations chosen at random; fitted on them, in natural logs of
the sources' predictions s_j, by least squares with a ridge of 2 toward the prior weights (one
source: log y = a + b s, b toward 1; two: log y = a + w1 s1 + w2 s2, the weights toward 1/2
each; the intercept free); scored on every other configuration: MAPE, mean over the draws. "all
rows" fits and scores on every configuration. This is an analysis of carb's predictions, not a
carb transfer: `carb fit --from` takes one source.
"""
import csv
import os
import subprocess
import sys
from collections import defaultdict

import numpy as np

CARB = os.environ.get("CARB", "build/src/cli/carb")


def run(*args):
    return subprocess.run([CARB, *args], check=True, capture_output=True, text=True).stdout


def predictions(model, keys_file):
    rows = csv.DictReader(run("predict", "--model", model, "--keys", keys_file,
                              "--format", "csv").splitlines())
    return {r["key"]: float(r["latency_ms"]) for r in rows}


def fit(x, y, prior, ridge):
    n, p = x.shape
    design = np.c_[np.ones(n), x]
    penalty = np.diag([0.0] + [ridge] * p)
    return np.linalg.solve(design.T @ design + penalty,
                           design.T @ y + penalty @ np.r_[0.0, prior])


def mape(x, y, weights):
    return 100 * np.mean(np.abs(np.exp(y - np.c_[np.ones(len(x)), x] @ weights) - 1))


def main():
    args = sys.argv[1:]
    draws = int(args[args.index("--draws") + 1]) if "--draws" in args else 20
    k = int(args[args.index("--k") + 1]) if "--k" in args else 16
    positional = [a for i, a in enumerate(args)
                  if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
    out = positional[0] if positional else "out/bench-transfer"
    target_db = f"{out}/cpu-reference-rounds.sqlite"
    for needed in (f"{out}/amd.json", target_db, f"{out}/engines-carb.sqlite"):
        if not os.path.exists(needed):
            sys.exit(f"{needed} is missing: run KS=16 CASES=amd-intel bash bench/transfer.sh {out}")
    second = f"{out}/sapphire.json"
    if not os.path.exists(second):
        run("fit", "--db", f"{out}/engines-carb.sqlite", "-o", second, "--threads", "1",
            "--drift", "auto")
    exported = f"{out}/rounds-export.csv"
    run("export", "--db", target_db, "--format", "csv", "-o", exported)
    rows = list(csv.DictReader(open(exported)))
    probe_median = np.median([float(r["drift_probe_ms"]) for r in rows if r["drift_probe_ms"]])
    by_key = defaultdict(list)
    for r in rows:
        if r["status"] != "ok":
            continue
        latency = float(r["device_median_ms"] or r["wall_median_ms"])
        factor = float(r["drift_probe_ms"]) / probe_median if r["drift_probe_ms"] else 1.0
        by_key[r["configuration_key"]].append(latency / factor)
    keys = sorted(by_key)
    keys_file = f"{out}/rounds-keys.txt"
    with open(keys_file, "w") as f:
        f.write("\n".join(keys) + "\n")
    y = np.log([np.median(by_key[key]) for key in keys])
    amd = predictions(f"{out}/amd.json", keys_file)
    other = predictions(second, keys_file)
    s_amd = np.log([amd[key] for key in keys])
    s_other = np.log([other[key] for key in keys])
    cases = [("the AMD reference", s_amd[:, None], [1.0]),
             ("another Intel host (carb's engine campaign)", s_other[:, None], [1.0]),
             ("both", np.c_[s_amd, s_other], [0.5, 0.5])]
    print(f"AMD -> Intel rounds ({len(keys)} configurations, latency drift-divided): "
          f"MAPE %, K = {k} random rows, mean over {draws} draws (min-max)")
    print(f"{'source':46} {'K = ' + str(k):>22} {'all rows':>9}")
    for name, x, prior in cases:
        scores = []
        for draw in range(draws):
            chosen = np.random.default_rng(draw).choice(len(keys), k, replace=False)
            rest = np.ones(len(keys), bool)
            rest[chosen] = False
            weights = fit(x[chosen], y[chosen], prior, 2.0)
            scores.append(mape(x[rest], y[rest], weights))
        everything = mape(x, y, fit(x, y, prior, 0.0))
        cell = f"{np.mean(scores):.2f} ({min(scores):.2f}-{max(scores):.2f})"
        print(f"{name:46} {cell:>22} {everything:9.2f}")


if __name__ == "__main__":
    main()
