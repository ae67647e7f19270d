"""The HTML report and the characterization from Python, as `carb report` and
`carb characterize` make them."""

import json
import re

import pytest

import carb
from conftest import SPACES, cli_error, cli_json, run_cli


def charts_in(path):
    return len(re.findall(r'class="chart"', path.read_text()))


def test_the_report_has_the_command_lines_charts(reference_db, cli_model, tmp_path):
    model = carb.load_model(cli_model)
    shortlist = carb.screen(model, carb.load_space(SPACES / "cpu-demo.yaml"),
                            budget="latency<=2ms,memory<=32MiB", json=tmp_path / "short.json")
    ours = tmp_path / "py.html"
    assert carb.report(reference_db, ours, model=model, screening=shortlist) == str(ours)
    theirs = tmp_path / "cli.html"
    result = run_cli("report", "--db", reference_db, "--model", cli_model, "--screening",
                     tmp_path / "short.json", "-o", theirs)
    assert f"({charts_in(ours)} charts," in result.stderr
    assert charts_in(ours) == charts_in(theirs) > 5
    text = ours.read_text()
    assert "<html" in text and "vega-lite" in text.lower()
    # The shortlist's keys are drawn.
    assert shortlist["key"].iloc[0] in text
    # From the model's file and the result file too.
    again = tmp_path / "again.html"
    carb.report([reference_db], again, model=cli_model, screening=tmp_path / "short.json")
    assert charts_in(again) == charts_in(ours)


def test_characterize_is_the_command_lines_json(reference_db, cli_model):
    ours = carb.characterize(reference_db, model=cli_model)
    theirs = cli_json("characterize", "--db", reference_db, "--model", cli_model, "--json")
    assert ours == theirs
    [device] = ours["devices"]
    energy = [t for t in device["targets"] if t["target"] == "energy"][0]
    assert energy["available"] is False and "energy" in energy["reason"]


def test_report_errors_are_the_command_lines(reference_db, tmp_path):
    missing = tmp_path / "missing.sqlite"
    message, code = cli_error("report", "--db", missing, "-o", tmp_path / "r.html", "--no-fit")
    with pytest.raises(carb.InputError) as raised:
        carb.report(missing, tmp_path / "r.html", fit=False)
    assert str(raised.value) == message and code == 2
    message, _ = cli_error("report", "--db", reference_db, "--device", "nothing", "-o",
                           tmp_path / "r.html", "--no-fit")
    with pytest.raises(carb.InputError) as raised:
        carb.report(reference_db, tmp_path / "r.html", devices=["nothing"], fit=False)
    assert message == "--" + str(raised.value) and raised.value.subject == "device"
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    message, _ = cli_error("report", "--db", reference_db, "--screening", not_json, "-o",
                           tmp_path / "r.html", "--no-fit")
    with pytest.raises(carb.InputError) as raised:
        carb.report(reference_db, tmp_path / "r.html", screening=not_json, fit=False)
    assert str(raised.value) == message
    assert not (tmp_path / "r.html").exists()
