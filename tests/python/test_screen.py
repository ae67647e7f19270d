"""Screening from Python: the shortlist `carb screen` prints, as a DataFrame, with the result
file carb report and carb validate read."""

import json

import numpy as np
import pandas as pd
import pytest

import carb
from conftest import SPACES, cli_error, cli_json, run_cli

BUDGET = "latency<=2ms,memory<=32MiB"


def test_the_shortlist_is_carb_screens(cli_model, reference_db, tmp_path):
    model = carb.load_model(cli_model)
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    shortlist = carb.screen(model, space, budget=BUDGET, json=tmp_path / "py.json")
    rows = cli_json("screen", "--model", cli_model, "--spec", SPACES / "cpu-demo.yaml",
                    "--budget", BUDGET, "--top", 100000, "--format", "json")
    assert len(shortlist) == len(rows) > 0
    for column in rows[0]:
        assert shortlist[column].tolist() == [row[column] for row in rows], column
    assert shortlist["rank"].tolist() == list(range(1, len(rows) + 1))
    # Ranked by value (MACs per image, up), all within the budgets by their predictions.
    assert shortlist["value_macs"].is_monotonic_decreasing
    assert (shortlist["latency_ms"] <= 2).all() and (shortlist["memory_B"] <= 32 * 2**20).all()
    assert shortlist["energy_J"].isna().all()
    counts = shortlist.attrs["counts"]
    assert counts["configurations"] == space.grid_points
    assert counts["outside_constraints"] == space.grid_points - space.count()
    # The result file: the command line's validate and report read it.
    saved = json.loads((tmp_path / "py.json").read_text())
    assert saved["model"] == str(cli_model)
    assert json.loads(shortlist.attrs["screening"]) == saved
    checked = run_cli("validate", "--shortlist", tmp_path / "py.json", "--db", reference_db)
    assert f"of {len(shortlist)} shortlisted configurations have measurements" in checked.stderr


def test_a_kernel_model_prices_the_latency_as_carb_screen_does(cli_model, tmp_path):
    keys = [f"{a}_w0.25_nods_r{r}_b1_fp32" for a in ("basic10", "basic18", "basic26")
            for r in (32, 48)]
    frame = carb.kernels(keys, passes=2, warmup=1)
    kernels = carb.fit(kernels=frame, threads=1, forest_trees=8, output=tmp_path / "k.json")
    model = carb.load_model(cli_model)
    shortlist, candidates = carb.screen(model, keys, budget="latency<=10s",
                                        kernel_model=kernels, all_candidates=True)
    assert shortlist.attrs["counts"]["latency_by_kernels"] == len(candidates) == len(keys)
    assert json.loads(shortlist.attrs["screening"])["kernel_model"] == str(tmp_path / "k.json")
    by_kernels = kernels.predict(list(candidates["key"]))
    for column in ("latency_ms", "latency_ms_low", "latency_ms_high"):
        np.testing.assert_allclose(candidates[column], by_kernels[column], rtol=1e-9)
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("\n".join(keys) + "\n")
    rows = cli_json("screen", "--model", cli_model, "--kernel-model", tmp_path / "k.json",
                    "--keys", keys_file, "--budget", "latency<=10s", "--top", 100,
                    "--format", "json")
    assert shortlist["key"].tolist() == [row["key"] for row in rows]
    np.testing.assert_allclose(shortlist["latency_ms"], [row["latency_ms"] for row in rows],
                               rtol=1e-6)
    with pytest.raises(carb.InputError, match="the kernel model is not one"):
        carb.screen(model, keys, kernel_model=model)


def test_keys_a_value_by_key_and_every_candidate(cli_model):
    model = carb.load_model(cli_model)
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    keys = space.keys(space.sample(200, seed=5))
    # A made-up accuracy per network key (a configuration key less batch and precision).
    accuracy = pd.Series({key.rsplit("_", 2)[0]: float(i) for i, key in enumerate(keys)},
                         name="top1")
    shortlist, candidates = carb.screen(model, keys, budget="latency<=20ms", value=accuracy,
                                        all_candidates=True)
    assert "value_top1" in shortlist.columns
    assert set(shortlist["key"]) <= set(keys)
    assert shortlist["value_top1"].is_monotonic_decreasing
    assert len(candidates) >= len(shortlist)
    on_front = candidates.dropna(subset=["front_rank"])
    assert sorted(on_front["key"]) == sorted(shortlist["key"])
    assert candidates["feasible"].dtype == bool
    # No value: a front over the costs alone, ranked by distance to the ideal.
    costs = carb.screen(model, keys, budget="latency<=20ms", maximize=None)
    assert not any(c.startswith("value_") for c in costs.columns)
    assert costs.attrs["rank"] == "ideal"


def test_screen_errors_name_the_parameter_where_the_command_line_names_the_flag(cli_model):
    model = carb.load_model(cli_model)
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    message, code = cli_error("screen", "--model", cli_model, "--spec", SPACES / "cpu-demo.yaml",
                              "--budget", "latency<=2xs")
    assert message.startswith("--budget:1:")
    with pytest.raises(carb.InputError) as raised:
        carb.screen(model, space, budget="latency<=2xs")
    assert str(raised.value) == message[len("--"):] and code == 2
    # Budgets nothing meets: the same line.
    message, _ = cli_error("screen", "--model", cli_model, "--spec", SPACES / "cpu-demo.yaml",
                           "--budget", "latency<=1us")
    with pytest.raises(carb.InputError) as raised:
        carb.screen(model, space, budget="latency<=1us")
    assert str(raised.value) == message
    # The options screen_request reads: the same line, the flag in the parameter's place.
    for flag, argument, parameter in (("--maximize", "speed", "maximize"),
                                      ("--outside-domain", "ignore", "outside_domain"),
                                      ("--rank", "best", "rank"),
                                      ("--keep", "0", "keep"),
                                      ("--value", "accuracy.csv", "value")):
        message, code = cli_error("screen", "--model", cli_model, "--spec",
                                  SPACES / "cpu-demo.yaml", flag, argument)
        with pytest.raises(carb.InputError) as raised:
            carb.screen(model, space, **{parameter: int(argument) if parameter == "keep"
                                         else argument})
        assert raised.value.subject == parameter and code == 2
        assert message == flag + str(raised.value)[len(parameter):], message
    with pytest.raises(carb.InputError, match="not both") as raised:
        carb.screen(model, space, maximize="params", value={"x": 1.0})
    assert raised.value.subject == "maximize"


def test_a_value_file_is_carb_screens_value(cli_model, tmp_path):
    """value="FILE:COLUMN" reads the file as `carb screen --value` does: the same shortlist."""
    model = carb.load_model(cli_model)
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    keys = space.keys(space.sample(300, seed=9))
    networks = sorted({key.rsplit("_", 2)[0] for key in keys})
    accuracy = pd.DataFrame({"key": networks,
                             "top1": np.linspace(0.5, 0.8, len(networks)).round(4)})
    accuracy.to_csv(tmp_path / "accuracy.csv", index=False)
    (tmp_path / "keys.txt").write_text("".join(key + "\n" for key in keys))
    rows = cli_json("screen", "--model", cli_model, "--keys", tmp_path / "keys.txt", "--budget",
                    "latency<=20ms", "--value", f"{tmp_path / 'accuracy.csv'}:top1", "--top",
                    100000, "--format", "json")
    for value in (f"{tmp_path / 'accuracy.csv'}:top1", (tmp_path / "accuracy.csv", "top1")):
        shortlist = carb.screen(model, keys, budget="latency<=20ms", value=value)
        assert shortlist["key"].tolist() == [row["key"] for row in rows]
        assert shortlist["value_top1"].tolist() == [row["value_top1"] for row in rows]
    # The same values as a Series: the same front.
    by_key = accuracy.set_index("key")["top1"]
    assert carb.screen(model, keys, budget="latency<=20ms",
                       value=by_key)["key"].tolist() == [row["key"] for row in rows]
    # A file's error is the command line's.
    message, _ = cli_error("screen", "--model", cli_model, "--keys", tmp_path / "keys.txt",
                           "--value", f"{tmp_path / 'accuracy.csv'}:top5")
    with pytest.raises(carb.InputError) as raised:
        carb.screen(model, keys, value=f"{tmp_path / 'accuracy.csv'}:top5")
    assert str(raised.value) == message
