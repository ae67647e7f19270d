"""The Python module's speed next to the C++ benchmarks, in one run, as ratios (docs/benchmarks.md,
"From Python"):

- features of every point of million.yaml into numpy arrays (Space.feature_arrays, and in chunks)
  against bench_space_features' cached passes (cold: a fresh cache; warm: the same one again);
- predictions with intervals of every point of paper.yaml as a DataFrame (Model.predict of the
  Space: keys, features, the ensemble, the frame) against bench_predict's features and ensemble.

Rounds alternate C++ and Python on one core (taskset's, inherited by the C++ benchmarks), best of
5 passes each as bench_predict takes them. Usage:

    /usr/bin/python3 bench/python_bench.py [--build build] [--rounds 3] [--model MODEL.json]

Without --model it fits one on the reference campaign with carb's default options first (a
minute or two). Prints a table; it is not a test.
"""

import argparse
import lzma
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]


def best_of(passes, work):
    """The fastest of `passes` timings of work(), seconds, and its last result."""
    best, result = float("inf"), None
    for _ in range(passes):
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def cpp_features(build):
    text = subprocess.run([build / "bench" / "bench_space_features",
                           SOURCE / "examples" / "spaces" / "million.yaml"],
                          capture_output=True, text=True, check=True).stdout
    rate = lambda name: float(re.search(name + r"\s+\d+\s+[\d.]+\s+(\d+)", text).group(1))
    return rate(r"cached, cold \(fills the cache\)"), rate(r"cached, warm")


def cpp_predict(build, model):
    text = subprocess.run([build / "bench" / "bench_predict", model,
                           SOURCE / "examples" / "spaces" / "paper.yaml"],
                          capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^both\s+[\d.]+\s+(\d+)", text, flags=re.M).group(1))


def python_features(carb):
    million = SOURCE / "examples" / "spaces" / "million.yaml"
    space = carb.load_space(million)  # a fresh cache: cold
    start = time.perf_counter()
    arrays = space.feature_arrays()
    cold = len(arrays["index"]) / (time.perf_counter() - start)
    start = time.perf_counter()
    arrays = space.feature_arrays()
    warm = len(arrays["index"]) / (time.perf_counter() - start)
    del arrays
    chunked = carb.load_space(million)
    start = time.perf_counter()
    points = sum(len(chunk["index"]) for chunk in chunked.feature_chunks())
    chunks = points / (time.perf_counter() - start)
    return cold, warm, chunks


def python_predict(carb, model):
    paper = SOURCE / "examples" / "spaces" / "paper.yaml"

    def work():
        return model.predict(carb.load_space(paper))  # a fresh cache each pass, as bench_predict

    seconds, frame = best_of(5, work)
    assert frame["latency_ms_high"].notna().all()
    return len(frame) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(SOURCE / "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model")
    parser.add_argument("--cpu", type=int, default=0, help="the core to run on")
    options = parser.parse_args()
    build = Path(options.build).resolve()
    work = Path(tempfile.mkdtemp(prefix="carb-python-bench-"))
    model_path = options.model
    if model_path is None:
        database = work / "cpu-reference.sqlite"
        with lzma.open(SOURCE / "data" / "cpu-reference.sqlite.xz") as packed, \
                open(database, "wb") as out:
            shutil.copyfileobj(packed, out)
        model_path = str(work / "cpu.json")
        print(f"fitting {model_path} on the reference campaign (carb's default options)...",
              file=sys.stderr)
        subprocess.run([build / "src" / "cli" / "carb", "fit", "--db", database, "-o", model_path],
                       check=True, capture_output=True)
    # One core for everything timed, before anything starts its threads (OpenMP sizes its pool
    # from the affinity it first sees); the C++ benchmarks inherit it.
    os.sched_setaffinity(0, {options.cpu})
    sys.path.insert(0, str(build / "python"))
    import carb

    model = carb.load_model(model_path)
    print(f"carb {carb.__version__} ({carb.git_commit}); model {model_path} "
          f"({model.device_name}); one core (cpu {options.cpu}); {options.rounds} rounds")

    rows = []
    for round_ in range(1, options.rounds + 1):
        cold_cpp, warm_cpp = cpp_features(build)
        cold_py, warm_py, chunks_py = python_features(carb)
        predict_cpp = cpp_predict(build, model_path)
        predict_py = python_predict(carb, model)
        rows.append((cold_cpp, cold_py, warm_cpp, warm_py, chunks_py, predict_cpp, predict_py))
        print(f"round {round_}: features cold C++ {cold_cpp / 1e6:.2f} M/s, Python "
              f"{cold_py / 1e6:.2f} M/s (chunks {chunks_py / 1e6:.2f}); warm C++ "
              f"{warm_cpp / 1e6:.2f}, Python {warm_py / 1e6:.2f} M/s; predict C++ "
              f"{predict_cpp:.0f}/s, Python {predict_py:.0f}/s ({predict_py / predict_cpp:.3f})",
              flush=True)

    median = lambda i: statistics.median(row[i] for row in rows)
    best = lambda i: max(row[i] for row in rows)
    ratio = lambda i, j: statistics.median(row[j] / row[i] for row in rows)
    print()
    print(f"{'rate (median of rounds; best of all rounds)':52} {'C++':>20} {'Python':>20} "
          f"{'Python/C++':>18}")
    for label, cpp, python in (
            ("million.yaml features, fresh cache, points/s", 0, 1),
            ("million.yaml features, warm cache, points/s", 2, 3),
            ("paper.yaml predict with intervals, configs/s", 5, 6)):
        print(f"{label:52} {median(cpp):10.0f}; {best(cpp):8.0f} {median(python):10.0f}; "
              f"{best(python):8.0f} {ratio(cpp, python):8.3f}; {best(python) / best(cpp):8.3f}")
    print(f"{'million.yaml features in chunks, fresh, points/s':52} {'':20} {median(4):10.0f}; "
          f"{best(4):8.0f}")
    print("goals: Python features >= 1,000,000 points/s; Python predict >= 0.9 x C++")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
