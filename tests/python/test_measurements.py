"""Databases from Python: every measurement as `carb export` writes it, NULL as NaN (numbers)
and None (text), never 0, on the reference campaign measured where no energy sensor was."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import carb
from conftest import cli_error, cli_json, run_cli


@pytest.fixture(scope="module")
def rows(reference_db):
    return carb.measurements(reference_db)


def test_null_is_nan_or_none_never_zero(rows):
    assert len(rows) == 1600
    # No sensor on that machine: energy is NULL with its reason.
    assert rows["energy_j"].dtype == np.float64
    assert rows["energy_j"].isna().all()
    assert not (rows["energy_j"] == 0).any()
    assert rows["dynamic_energy_j"].isna().all()
    assert rows["energy_window_inferences"].isna().all()  # an integer column: NaN, not 0
    assert rows["energy_method"].eq("none").all()  # the meter's name: there was none
    assert rows["energy_null_reason"].map(lambda v: isinstance(v, str) and len(v) > 0).all()
    # A CPU has no device clock: the device latency columns are NULL, the wall clock's are not.
    assert rows["device_median_ms"].isna().all()
    assert rows["device_count"].isna().all()
    assert rows["device_converged"].dtype == object  # a boolean column with NULLs: None
    assert rows["device_converged"].map(lambda v: v is None).all()
    assert rows["wall_median_ms"].gt(0).all()
    assert rows["engine_peak_bytes"].dtype == np.int64 and rows["engine_peak_bytes"].gt(0).all()
    assert rows["wall_converged"].dtype == bool
    assert rows["early_downsample"].dtype == bool
    assert rows["macs"].dtype == np.int64
    assert rows.attrs["kinds"]["provenance"] == "json"


def test_the_values_are_carb_exports(rows, reference_db):
    """JSON Lines tell NULL (null) from empty text: the same as ours, value for value."""
    lines = run_cli("export", "--db", reference_db, "--format", "jsonl").stdout.splitlines()
    exported = [json.loads(line) for line in lines]
    assert list(rows.columns) == list(exported[0].keys())
    for column in rows.columns:
        kind = rows.attrs["kinds"][column]
        for ours, theirs in zip(rows[column], (row[column] for row in exported)):
            if theirs is None:
                assert ours is None or (isinstance(ours, float) and math.isnan(ours)), column
            elif kind == "json":
                assert json.loads(ours) == theirs, column
            elif kind in ("integer", "real"):
                assert float(ours) == float(theirs), column
            else:
                assert ours == theirs, column


def test_ok_only_and_errors(reference_db, tmp_path):
    assert len(carb.measurements(reference_db, ok_only=True)) == 1600
    for path in (tmp_path / "missing.sqlite", reference_db.parent / "not-a-db.sqlite"):
        if path.name == "not-a-db.sqlite":
            path.write_text("this is no database")
        message, code = cli_error("export", "--db", path)
        with pytest.raises(carb.InputError) as raised:
            carb.measurements(path)
        assert str(raised.value) == message and code == 2


def test_devices_are_carb_devices():
    devices = carb.devices()
    listed = devices.dropna(subset=["id"])
    theirs = cli_json("devices", "--format", "json")
    assert listed["id"].tolist() == [row["id"] for row in theirs]
    for (_, ours), row in zip(listed.iterrows(), theirs):
        assert (ours["kind"], ours["name"], ours["library"], ours["isa"], ours["threads"]) == (
            row["kind"], row["name"], row["library"], row["isa"], row["threads"])
    cpu = listed[listed["id"] == "cpu:0"]
    assert len(cpu) == 1 and cpu["threads"].iloc[0] > 0
