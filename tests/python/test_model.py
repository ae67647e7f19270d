"""Models from Python: fit from a database or a DataFrame, load and save, and predictions
identical to `carb predict`'s for the same model and keys."""

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

import carb
from conftest import QUICK_FIT, QUICK_FIT_FLAGS, SPACES, cli_error, cli_json, run_cli

KEYS = ["basic10_w0.5_nods_r64_b1_fp32", "bottleneck26_w0.25_ds_r96_b8_fp32",
        "basic34_w1_ds_r128_b32_fp32", "bottleneck50_w0.75_nods_r32_b2_fp32"]


def cli_number(value):
    """A number as carb's CSV prints it (reals with up to 6 significant digits); "" for NaN."""
    return "" if math.isnan(value) else f"{value:.6g}"


def prediction_columns(frame):
    return [c for c in frame.columns if c not in ("key", "architecture", "index",
                                                  "inside_domain", "domain_distance")]


def test_predictions_equal_carb_predicts_exactly(cli_model, tmp_path):
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("".join(k + "\n" for k in KEYS))
    model = carb.load_model(cli_model)
    frame = model.predict(KEYS)
    # JSON carries every bit of a double: equal, not close.
    rows = cli_json("predict", "--model", cli_model, "--keys", keys_file, "--format", "json")
    assert list(frame.columns) == list(rows[0].keys())
    for column in frame.columns:
        ours = frame[column].tolist()
        # What does not exist is null in carb's JSON: NaN in a number column, None in text.
        theirs = [row[column] for row in rows]
        if column in ("key", "architecture"):
            assert ours == theirs
        else:
            theirs = [math.nan if value is None else value for value in theirs]
            assert np.array_equal(np.array(ours, dtype=float), np.array(theirs, dtype=float),
                                  equal_nan=True), column
    # The CSV the brief names, cell by cell, as the command line formats numbers.
    csv = run_cli("predict", "--model", cli_model, "--keys", keys_file, "--format",
                  "csv").stdout.splitlines()
    assert csv[0].split(",") == list(frame.columns)
    for line, (_, row) in zip(csv[1:], frame.iterrows()):
        assert line.split(",") == [row["key"], ""] + [cli_number(row[c])
                                                  for c in prediction_columns(frame)]
    # ResNets have no architecture name (None, as carb's JSON has null).
    assert frame["architecture"].tolist() == [None] * len(KEYS)
    # Energy was never measured on the reference campaign's machine: NaN, with the reason.
    assert frame["energy_J"].isna().all()
    assert "energy" in frame.attrs["unavailable"]
    assert frame["latency_ms"].gt(0).all()
    assert (frame["latency_ms_low"] <= frame["latency_ms"]).all()
    assert (frame["latency_ms"] <= frame["latency_ms_high"]).all()


def test_a_space_predicts_as_carb_predict_spec(cli_model):
    model = carb.load_model(cli_model)
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    frame = model.predict(space, sample=30, seed=2)
    rows = cli_json("predict", "--model", cli_model, "--spec", SPACES / "cpu-demo.yaml",
                    "--sample", 30, "--seed", 2, "--format", "json")
    assert frame["key"].tolist() == [row["key"] for row in rows]
    for column in prediction_columns(frame):
        theirs = [math.nan if row[column] == "" else row[column] for row in rows]
        assert np.array_equal(frame[column].to_numpy(), np.array(theirs, dtype=float),
                              equal_nan=True), column
    assert frame["index"].tolist() == space.sample(30, seed=2).tolist()
    # Without the engine's plan, memory is the model's own estimate: of the same keys, the same
    # latencies.
    estimate = model.predict(space, sample=30, seed=2, plan_memory=False)
    assert estimate.attrs["memory_planned"] == 0
    assert np.array_equal(estimate["latency_ms"], frame["latency_ms"])
    domain = model.predict(space, indices=frame["index"], domain=True)
    assert domain["inside_domain"].dtype == bool
    assert (domain["domain_distance"] >= 0).all()


def test_a_dataframe_in_keeps_its_index(cli_model):
    model = carb.load_model(cli_model)
    frame = pd.DataFrame({"key": KEYS, "note": list("abcd")}, index=[10, 11, 12, 13])
    predicted = model.predict(frame)
    assert predicted.index.tolist() == [10, 11, 12, 13]
    assert predicted["key"].tolist() == KEYS
    assert model.predict(pd.Series(KEYS))["key"].tolist() == KEYS
    assert model.predict(KEYS[0])["key"].tolist() == KEYS[:1]


def test_fit_from_the_database_is_carb_fits_model(reference_db, cli_model, tmp_path):
    model = carb.fit(db=reference_db, output=tmp_path / "py.json", **QUICK_FIT)
    assert model.path == str(tmp_path / "py.json")
    assert model.data["rows"] == 1600
    assert model.device_name == carb.load_model(cli_model).device_name
    ours = model.predict(KEYS, plan_memory=False)
    theirs = carb.load_model(cli_model).predict(KEYS, plan_memory=False)
    pd.testing.assert_frame_equal(ours, theirs)
    scores = model.scores
    assert list(scores.columns[:3]) == ["target", "method", "n"]
    carb_latency = scores[(scores.target == "latency") & (scores.method == "carb")]
    assert len(carb_latency) == 1 and 0.5 < carb_latency["r2"].iloc[0] <= 1
    # Saved and loaded, it predicts the same.
    pd.testing.assert_frame_equal(carb.load_model(tmp_path / "py.json").predict(KEYS),
                                  model.predict(KEYS))


def test_fit_from_a_dataframe_of_measurements_is_the_same_fit(reference_db):
    rows = carb.measurements(reference_db)
    quick = dict(QUICK_FIT, baselines=False)
    from_frame = carb.fit(rows, **quick)
    from_db = carb.fit(reference_db, drift="off", **quick)
    assert from_frame.device_fingerprint == from_db.device_fingerprint
    assert from_frame.instances == from_db.instances
    pd.testing.assert_frame_equal(from_frame.predict(KEYS, plan_memory=False),
                                  from_db.predict(KEYS, plan_memory=False))
    # A subset of the rows is a smaller fit.
    fewer = carb.fit(rows[rows["batch"] <= 8], **quick)
    assert fewer.data["rows"] == int((rows["batch"] <= 8).sum())


def test_a_table_model_from_a_dataframe_predicts_as_carb_predict_table(tmp_path, cli_model):
    rng = np.random.default_rng(3)
    a = rng.uniform(1, 100, 300)
    b = rng.uniform(0, 1, 300)
    table = pd.DataFrame({"a": a, "b": b, "y": a * (1 + b) + rng.uniform(0, 0.1, 300)})
    model = carb.fit(table, features=["a", "b"], targets=["y"], threads=1, forest_trees=8)
    assert model.schema == "table"
    assert model.feature_names == ["log_a", "b"]  # a spans two decades: log1p
    table.to_csv(tmp_path / "train.csv", index=False)
    run_cli("fit", "--table", tmp_path / "train.csv", "--features", "a,b", "--target", "y",
            "--threads", 1, "--forest-trees", 8, "-o", tmp_path / "cli.json", "--format", "json")
    new = table.head(5)[["b", "a"]].set_index(pd.Index([5, 6, 7, 8, 9]))
    new.to_csv(tmp_path / "new.csv", index=False)
    theirs = cli_json("predict", "--model", tmp_path / "cli.json", "--table", tmp_path / "new.csv",
                      "--format", "json")
    ours = carb.load_model(tmp_path / "cli.json").predict(new)
    assert ours.index.tolist() == [5, 6, 7, 8, 9]
    assert ours["y"].tolist() == [row["y"] for row in theirs]
    assert ours["y_high"].tolist() == [row["y_high"] for row in theirs]
    pd.testing.assert_frame_equal(model.predict(new), ours)
    # A cell that is no number: the table's place, as from a CSV file (row r on line r + 2).
    bad = new.astype(object)
    bad.iloc[1, 0] = "x"
    with pytest.raises(carb.InputError, match=r"^<DataFrame>:3:1: 'x' is not a finite number$"):
        model.predict(bad)
    with pytest.raises(carb.InputError, match="predict from a DataFrame"):
        model.predict(KEYS)
    # Scored on rows of a narrower span (a from 40 to 60: not log1p there), in the model's layout,
    # as carb evaluate --table scores them.
    narrow = table[(table.a > 40) & (table.a < 60)]
    narrow.to_csv(tmp_path / "narrow.csv", index=False)
    theirs = cli_json("evaluate", "--model", tmp_path / "cli.json", "--table",
                      tmp_path / "narrow.csv", "--format", "json")
    ours = carb.evaluate(carb.load_model(tmp_path / "cli.json"), narrow)
    assert len(ours) == len(theirs["scores"]) >= 1
    for (_, row), cells in zip(ours.iterrows(), theirs["scores"]):
        assert (row["target"], row["method"], row["n"]) == \
            (cells["target"], cells["method"], cells["n"])
        assert row["mape_pct"] == cells["mape"]
        assert row["coverage_pct"] == cells["coverage"] if cells["coverage"] is not None else \
            math.isnan(row["coverage_pct"])
    assert ours.attrs["data"]["rows"] == len(narrow)
    assert ours[ours.method == "carb"].iloc[0]["mape_pct"] < 10
    with pytest.raises(carb.InputError, match="fitted on carb measurements, not on a table"):
        carb.evaluate(carb.load_model(cli_model), narrow)
    with pytest.raises(carb.InputError, match="no column 'b'|'b'"):
        carb.evaluate(model, narrow[["a", "y"]])


def test_a_models_properties_are_its_files(cli_model):
    model = carb.load_model(cli_model)
    saved = json.loads(open(cli_model).read())
    assert json.loads(model.to_json())["device"] == saved["device"]
    assert model.schema == saved["feature_schema"]["name"] == "carb-ir-5"
    assert model.feature_names == saved["feature_schema"]["features"]
    assert [t["name"] for t in model.targets] == ["memory", "energy", "latency"]
    assert [t["unit"] for t in model.targets] == ["B", "J", "ms"]
    assert model.coverage == 0.9
    assert model.transferred is False and "transfer" not in saved
    assert model.drift["applied"] is False
    assert model.instances == saved["device"]["instances"]
    assert model.device_fingerprint == saved["device"]["fingerprint"]
    report = model.fit_report
    assert report["train_rows"] + report["validation_rows"] + report["calibration_rows"] + \
        report["test_rows"] == 1600
    assert len(model.fitted_keys) == 1600 - report["test_rows"]
    assert "AMD EPYC" in repr(model)


def _first_configurations(reference_db, tmp_path, count):
    """A copy of the reference campaign with only its first `count` configurations' rows."""
    import sqlite3
    import shutil
    few = tmp_path / "few.sqlite"
    shutil.copy(reference_db, few)
    with sqlite3.connect(few) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("DELETE FROM measurements WHERE configuration_key NOT IN (SELECT DISTINCT "
                   "configuration_key FROM measurements ORDER BY configuration_key LIMIT ?)",
                   (count,))
    return few


def test_a_transfer_is_carb_fit_from(reference_db, cli_model, tmp_path):
    """fit(source=...) is `carb fit --from`: the same model file, and the same choice and why."""
    few = _first_configurations(reference_db, tmp_path, 40)  # a quick transfer
    cli_file = tmp_path / "cli-transfer.json"
    cli = cli_json("fit", "--from", cli_model, "--db", few, "-o", cli_file, "--threads", "1",
                   "--drift", "off", "--format", "json")
    model = carb.fit(db=few, source=carb.load_model(cli_model), drift="off", threads=1,
                     output=tmp_path / "py-transfer.json")
    assert model.transferred and model.data["rows"] == 40
    ours_file = json.loads((tmp_path / "py-transfer.json").read_text())
    assert ours_file["transfer"] == json.loads(cli_file.read_text())["transfer"]
    latency = [t for t in model.transfer["targets"] if t["target"] == "latency"][0]
    theirs = [t for t in cli["targets"] if t["target"] == "latency"][0]
    assert latency["method"] == theirs["method"] and latency["why"] == theirs["why"]
    assert latency["rows"] == 40
    assert set(latency["cv_mape_pct"]) == set(theirs["cv_mape"])
    assert model.transfer["notes"] == cli["notes"]
    pd.testing.assert_frame_equal(model.predict(KEYS), carb.load_model(cli_file).predict(KEYS))
    # A transfer fits a database's device.
    with pytest.raises(carb.InputError) as raised:
        carb.fit(carb.measurements(few), source=carb.load_model(cli_model))
    assert raised.value.subject == "source"


def test_a_transfer_from_two_sources_is_carb_fit_from_twice(reference_db, cli_model, tmp_path):
    """fit(source=[a, b]) is `carb fit --from a --from b`: the same model file, both sources in it,
    and the sources candidate cross-validated."""
    few = _first_configurations(reference_db, tmp_path, 40)  # a quick transfer
    cli_file = tmp_path / "cli-two.json"
    cli = cli_json("fit", "--from", cli_model, "--from", cli_model, "--db", few, "-o", cli_file,
                   "--threads", "1", "--drift", "off", "--format", "json")
    source = carb.load_model(cli_model)
    model = carb.fit(db=few, source=[source, source], drift="off", threads=1,
                     output=tmp_path / "py-two.json")
    ours_file = json.loads((tmp_path / "py-two.json").read_text())
    assert ours_file["transfer"] == json.loads(cli_file.read_text())["transfer"]
    assert len(ours_file["transfer"]["more_sources"]) == 1
    assert model.transfer["more_sources"] == cli["more_sources"] and len(cli["more_sources"]) == 1
    latency = [t for t in model.transfer["targets"] if t["target"] == "latency"][0]
    assert "sources" in latency["cv_mape_pct"]
    with pytest.raises(carb.InputError) as raised:
        carb.fit(db=few, source=[source, "model.json"], drift="off")
    assert raised.value.subject == "source"
    # A model of a table is no source, first or further, and says which it is.
    rng = np.random.default_rng(1)
    a = rng.uniform(1, 10, 60)
    table = carb.fit(pd.DataFrame({"a": a, "y": 2 * a}), features=["a"], targets=["y"],
                     threads=1, forest_trees=8)
    with pytest.raises(carb.InputError) as raised:
        carb.fit(db=few, source=[source, table], drift="off")
    assert "a further source model was fitted on a table" in str(raised.value)


def test_a_held_out_transfer_is_carb_fit_from_rows(reference_db, cli_model, tmp_path):
    """fit(source=..., rows=K, choose=...) is `carb fit --from --rows K --choose`: the same K
    rows, the same model and the same scores of the rest, to the bit."""
    few = _first_configurations(reference_db, tmp_path, 40)  # a quick transfer
    source = carb.load_model(cli_model)
    for choose in ("spread", "random"):
        cli_file = tmp_path / f"cli-{choose}.json"
        cli = cli_json("fit", "--from", cli_model, "--db", few, "-o", cli_file, "--threads", "1",
                       "--drift", "off", "--rows", "12", "--seed", "3", "--choose", choose,
                       "--format", "json")
        model = carb.fit(db=few, source=source, drift="off", threads=1, rows=12, seed=3,
                         choose=choose)
        theirs = carb.load_model(cli_file)
        assert model.fitted_keys == theirs.fitted_keys and len(model.fitted_keys) == 12
        assert model.transfer["rows"] == cli["rows"] == 12
        assert model.transfer["scored_rows"] == cli["scored_rows"] == 28
        frame = model.transfer["scores"]
        assert len(frame) == len(cli["scores"]) >= 2
        for (_, ours), cells in zip(frame.iterrows(), cli["scores"]):
            assert (ours["target"], ours["method"], ours["n"]) == \
                (cells["target"], cells["method"], cells["n"])
            assert ours["mape_pct"] == cells["mape"] and ours["spearman"] == cells["spearman"]
        # The source was fitted on every one of these configurations: none is new to it.
        assert model.transfer["scored_rows_new_to_source"] == 0
        assert cli["scored_rows_new_to_source"] == 0
        assert model.transfer["scores_new_to_source"].empty
        pd.testing.assert_frame_equal(model.predict(KEYS), theirs.predict(KEYS))
    spread = carb.fit(db=few, source=source, drift="off", threads=1, rows=12, seed=3)
    assert spread.fitted_keys != model.fitted_keys  # the default choice is spread, not random
    # More rows than measured: all of them, none scored, and a warning says so.
    with pytest.warns(UserWarning, match="rows=100 but the database holds 40"):
        everything = carb.fit(db=few, source=source, drift="off", threads=1, rows=100)
    assert everything.transfer["rows"] == 40 and everything.transfer["scores"].empty
    for kwargs, subject in (({"rows": 12}, "rows"), ({"source": source, "rows": 0}, "rows"),
                            ({"source": source, "rows": 12, "choose": "best"}, "choose")):
        with pytest.raises(carb.InputError) as raised:
            carb.fit(db=few, drift="off", **kwargs)
        assert raised.value.subject == subject


def test_evaluate_is_carb_evaluate(reference_db, cli_model, tmp_path):
    """evaluate() scores what `carb evaluate --db` scores, to the bit, and says what it scored."""
    few = _first_configurations(reference_db, tmp_path, 40)  # a quick evaluation
    cli = cli_json("evaluate", "--model", cli_model, "--db", few, "--format", "json")
    frame = carb.evaluate(carb.load_model(cli_model), few)
    assert len(frame) == len(cli["scores"]) and len(frame) >= 2
    for (_, ours), theirs in zip(frame.iterrows(), cli["scores"]):
        assert (ours["target"], ours["method"], ours["n"]) == \
            (theirs["target"], theirs["method"], theirs["n"])
        assert ours["mape_pct"] == theirs["mape"] and ours["spearman"] == theirs["spearman"]
        if theirs["coverage"] is None:
            assert math.isnan(ours["coverage_pct"])
        else:
            assert ours["coverage_pct"] == theirs["coverage"]
    carb_latency = frame[(frame.target == "latency") & (frame.method == "carb")].iloc[0]
    assert carb_latency["n"] == 40 and 0 < carb_latency["mape_pct"] < 50
    assert frame.attrs["same_fingerprint"] is cli["same_fingerprint"] is True
    assert frame.attrs["memory_planned"] == cli["memory_planned"]
    assert frame.attrs["data"]["rows"] == 40
    assert {d["target"] for d in frame.attrs["distance"]} >= {"latency", "memory"}
    # Bad input is the command line's error.
    for args, kwargs in (((tmp_path / "missing.sqlite",), {}), ((few,), {"drift": "sideways"}),
                         ((few,), {"device": "no such device"})):
        with pytest.raises((carb.InputError, ValueError)) as raised:
            carb.evaluate(carb.load_model(cli_model), *args, **kwargs)
        assert str(raised.value)
    message, code = cli_error("evaluate", "--model", cli_model, "--db", tmp_path / "missing.sqlite")
    with pytest.raises(carb.InputError) as raised:
        carb.evaluate(carb.load_model(cli_model), tmp_path / "missing.sqlite")
    assert str(raised.value) == message and code == 2


def test_model_errors_are_the_command_lines(tmp_path, cli_model):
    not_a_model = tmp_path / "not-a-model.json"
    not_a_model.write_text('{"format": "something else"}')
    for path in (not_a_model, tmp_path / "missing.json"):
        message, code = cli_error("predict", "--model", path, KEYS[0])
        with pytest.raises(carb.InputError) as raised:
            carb.load_model(path)
        assert str(raised.value) == message and code == 2
    message, _ = cli_error("predict", "--model", cli_model, "basic18_w1_ds_r64_b1_fp99")
    with pytest.raises(carb.InputError) as raised:
        carb.load_model(cli_model).predict("basic18_w1_ds_r64_b1_fp99")
    assert str(raised.value) == message
    # A subject: the command line names the flag, the module the parameter.
    with pytest.raises(carb.InputError) as raised:
        carb.fit(db=tmp_path / "x.sqlite", drift="sometimes")
    assert str(raised.value) == "drift must be auto, on or off"
    assert raised.value.subject == "drift"
    with pytest.raises(carb.InputError) as raised:
        carb.fit(db=tmp_path / "x.sqlite", prior="median")
    assert raised.value.subject == "prior"
    with pytest.raises(carb.InputError, match="either a database"):
        carb.fit()


def test_a_kernel_model_fits_and_predicts_as_the_command_line(tmp_path):
    keys = [f"{a}_w0.25_nods_r{r}_b1_fp32" for a in ("basic10", "basic18", "basic26", "basic34",
                                                     "bottleneck14", "bottleneck26")
            for r in (32, 40)]
    frame = carb.kernels(keys, passes=2, warmup=1)
    timings = tmp_path / "kernels.csv"
    frame.to_csv(timings, index=False)
    cli_path = tmp_path / "cli.json"
    run_cli("fit", "--kernels", timings, "--threads", "1", "--forest-trees", "8", "-o", cli_path)
    # From the DataFrame and from the file: the command line's model, number for number.
    from_frame = carb.fit(kernels=frame, threads=1, forest_trees=8, output=tmp_path / "py.json")
    from_file = carb.fit(kernels=[timings], threads=1, forest_trees=8)
    assert from_frame.schema == from_file.schema == "kernels"
    # Fitted as measured, as carb fit --kernels does; drift="on" divides each configuration's
    # kernels by the drift its probe measured.
    assert not from_frame.drift["applied"] and not from_file.drift["applied"]
    divided = carb.fit(kernels=frame, threads=1, forest_trees=8, drift="on")
    assert divided.drift["applied"] and divided.drift["probe"] == carb.DEFAULT_DRIFT_PROBE
    # Six architectures hold out one, two configurations: too few to calibrate whole passes.
    assert from_frame.kernel_pass_interval is None
    assert any("kernels' bounds summed" in note for note in from_frame.fit_report["notes"])
    cli = run_cli("predict", "--model", cli_path, "--format", "csv", *keys[:4]).stdout
    expected = pd.read_csv(io.StringIO(cli))
    for model in (from_frame, from_file, carb.load_model(cli_path)):
        got = model.predict(keys[:4])
        assert list(got["key"]) == keys[:4]
        for column in ("latency_ms", "latency_ms_low", "latency_ms_high"):
            np.testing.assert_allclose(got[column], expected[column], rtol=1e-5)
        assert (got["latency_ms_low"] < got["latency_ms"]).all()
        assert (got["latency_ms"] < got["latency_ms_high"]).all()
    # Each configuration's kernels summed: a deeper network is predicted slower.
    deeper = from_frame.predict(["basic10_w0.25_nods_r32_b1_fp32",
                                 "basic34_w0.25_nods_r32_b1_fp32"])["latency_ms"]
    assert deeper.iloc[1] > deeper.iloc[0]
    with pytest.raises(carb.InputError, match="domain is of kernels"):
        from_frame.predict(keys[:1], domain=True)
    with pytest.raises(carb.InputError, match="alone"):
        carb.fit(kernels=frame, db=tmp_path / "x.sqlite")
    with pytest.raises(carb.InputError, match="kernels takes"):
        carb.fit(kernels=[42])
