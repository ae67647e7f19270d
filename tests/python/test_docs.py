"""docs/python.md's walkthrough runs as written, cell after cell, from a folder laid out as the
repository (its data/ and examples/), and makes what it says. Only its fit is quicker than the
walkthrough's (carb's default options take a minute on a busy 2-core machine): the same call,
with the test suite's quick options."""

import functools
import os
import re

import carb
from conftest import QUICK_FIT, SOURCE


def walkthrough_cells():
    text = (SOURCE / "docs" / "python.md").read_text()
    section = text.split("## A walkthrough, cell by cell", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_walkthrough_runs_as_written(tmp_path, monkeypatch):
    cells = walkthrough_cells()
    assert len(cells) >= 6
    for name in ("data", "examples"):
        (tmp_path / name).symlink_to(SOURCE / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(carb, "fit", functools.partial(carb.fit, **QUICK_FIT))
    scope = {}
    for cell in cells:
        exec(compile(cell, "docs/python.md", "exec"), scope)
    assert len(scope["runs"]) == 1600
    assert scope["runs"]["energy_j"].isna().all()
    assert carb.load_model("cpu.json").device_name == scope["model"].device_name
    assert len(scope["predicted"]) == scope["space"].count()
    assert len(scope["shortlist"]) > 0
    assert (scope["shortlist"]["latency_ms"] <= 2).all()
    assert 100 < len(scope["both"]) < 400  # the test split: 15% of 1,600
    assert os.path.getsize("measured-vs-predicted.png") > 10000
    assert "vega" in (tmp_path / "report.html").read_text()
