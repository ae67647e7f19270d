"""Campaigns from Python on the real CPU engine: measured into a database as `carb profile`
does, resumed, and stopped by Ctrl-C (a real SIGINT) with every finished measurement kept."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import carb
from conftest import SPACES, cli_error, run_cli

# Tiny networks that run in well under a millisecond, and a protocol of hundredths of a second.
TINY = [f"basic10_w0.25_nods_r32_b{b}_fp32_k10" for b in range(1, 13)]
QUICK = dict(min_time=0.02, max_time=0.2, target_ci=0.5, idle_window=0.1, drift_probe=None,
             timeout=60, progress=False)


def test_profile_measures_into_the_database_and_resumes(tmp_path):
    db = tmp_path / "runs.sqlite"
    seen = []
    summary = carb.profile(db, TINY[:3], **{**QUICK, "progress": False})
    assert summary["measured"] == {"ok": 3}
    assert summary["already_done"] == 0 and not summary["stopped"]
    assert summary["device_id"] == "cpu:0"
    assert "instance" in summary["host"]
    rows = carb.measurements(db)
    assert sorted(rows["configuration_key"]) == sorted(TINY[:3])
    assert (rows["status"] == "ok").all()
    again = carb.profile(db, TINY[:3], **QUICK)
    assert again["measured"] == {} and again["already_done"] == 3
    # A configuration no CPU runs is a row too; what it has not is NULL: NaN and None, never 0.
    fp16 = TINY[0].replace("fp32", "fp16")
    assert carb.profile(db, [fp16], **QUICK)["measured"] == {"unsupported": 1}
    rows = carb.measurements(db).set_index("configuration_key")
    failed = rows.loc[fp16]
    assert failed["status"] == "unsupported" and "fp16" in failed["detail"]
    assert np.isnan(failed["wall_median_ms"]) and np.isnan(failed["engine_peak_bytes"])
    assert failed["energy_null_reason"] is None and failed["energy_method"] is None
    assert failed["wall_converged"] is None
    ok = rows.loc[TINY[0]]
    assert ok["wall_median_ms"] > 0 and ok["wall_converged"] in (True, False)
    assert np.isnan(ok["energy_j"]) or ok["energy_j"] > 0
    # A space's sample, with the progress bar on (stderr is no terminal here: tqdm's text).
    space = carb.load_space(SPACES / "cpu-demo.yaml")
    sampled = carb.profile(tmp_path / "space.sqlite", space, sample=2, seed=1,
                           **{**QUICK, "progress": True, "min_time": 0.01, "max_time": 0.05})
    assert sampled["selected"] == 2
    keys = set(carb.measurements(tmp_path / "space.sqlite")["configuration_key"])
    assert keys == set(space.keys(space.sample(2, seed=1)))


def test_profile_on_the_pytorch_backend(tmp_path):
    """The PyTorch backend takes carb's functions from what loaded it: the module, here."""
    if "torch:0" not in set(carb.devices()["id"].dropna()):
        pytest.skip("this build has no PyTorch backend (docs/torch.md)")
    summary = carb.profile(tmp_path / "torch.sqlite", [TINY[0]], device="torch:0", **QUICK)
    assert summary["device_id"] == "torch:0"
    assert summary["measured"] == {"ok": 1}
    [library] = set(carb.measurements(tmp_path / "torch.sqlite")["device_fingerprint"])
    assert "PyTorch" in library


def test_kernels_are_the_command_lines_rows(tmp_path):
    """carb.kernels gives carb kernels' columns, one row per kernel, and its errors."""
    frame = carb.kernels(TINY[:2], passes=2, warmup=1)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(key + "\n" for key in TINY[:2]))
    out = run_cli("kernels", "--keys", keys, "--passes", 2, "--warmup", 1, "--format",
                  "csv").stdout
    header, *rows = out.strip().split("\n")
    assert list(frame.columns) == header.split(",")
    assert len(frame) == len(rows)
    assert list(frame["kernel"]) == [row.split(",")[2] for row in rows]
    for key, group in frame.groupby("key"):
        assert list(group["index"]) == list(range(len(group)))
        assert group["share"].sum() == pytest.approx(1.0)
        assert group["macs"].sum() == carb.features([key])["macs"][0]
    assert (frame["median_ms"] > 0).all() and (frame["pass_ms"] > 0).all()
    # The drift probe's latency at each configuration's moment, one per configuration.
    assert (frame["drift_probe"] == carb.DEFAULT_DRIFT_PROBE).all()
    assert (frame["probe_ms"] > 0).all()
    assert (frame.groupby("key")["probe_ms"].nunique() == 1).all()
    unprobed = carb.kernels(TINY[:1], passes=1, warmup=0, drift_probe=None)
    assert unprobed["probe_ms"].isna().all() and unprobed["drift_probe"].isna().all()
    message, code = cli_error("kernels", "--keys", keys, "--device", "cuda:3")
    with pytest.raises(carb.InputError) as raised:
        carb.kernels(TINY[:1], device="cuda:3")
    assert str(raised.value) == message and code == 2
    with pytest.raises(carb.InputError):
        carb.kernels(TINY[:1], passes=0)
    # Rounds: one row per kernel still, each configuration's medians of its rounds.
    rounds = carb.kernels(TINY[:2], passes=1, warmup=0, rounds=3)
    assert list(rounds.columns) == list(frame.columns)
    assert list(rounds["kernel"]) == list(frame["kernel"])
    for key, group in rounds.groupby("key"):
        assert group["share"].sum() == pytest.approx(1.0)
    with pytest.raises(carb.InputError) as raised:
        carb.kernels(TINY[:1], rounds=0)
    assert raised.value.subject == "rounds"


def test_profile_errors_are_the_command_lines(tmp_path, monkeypatch):
    keys = tmp_path / "keys.txt"
    keys.write_text(TINY[0] + "\n")
    message, code = cli_error("profile", "--keys", keys, "--device", "cuda:3", "--db",
                              tmp_path / "x.sqlite")
    with pytest.raises(carb.InputError) as raised:
        carb.profile(tmp_path / "x.sqlite", [TINY[0]], device="cuda:3", **QUICK)
    assert str(raised.value) == message and code == 2
    message, _ = cli_error("profile", "--keys", keys, "--shard", "4/4", "--db",
                           tmp_path / "x.sqlite")
    with pytest.raises(carb.InputError) as raised:
        carb.profile(tmp_path / "x.sqlite", [TINY[0]], shard="4/4", **QUICK)
    # The command line names the flag, the module the parameter (the subject).
    assert message == "--" + str(raised.value) and raised.value.subject == "shard"
    monkeypatch.setenv("CARB_EXECUTABLE", str(tmp_path / "no-carb-here"))
    with pytest.raises(carb.CarbRuntimeError, match="no-carb-here is missing"):
        carb.profile(tmp_path / "x.sqlite", [TINY[0]], **QUICK)


class StandInBar:
    """Records what the progress bar is told (tqdm's calls that Progress makes)."""

    made = []

    def __init__(self, total, desc, unit):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.postfix, self.refreshed, self.closed = None, 0, False
        StandInBar.made.append(self)

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text

    def refresh(self):
        self.refreshed += 1

    def close(self):
        self.closed = True


def states(total):
    for finished in range(1, total + 1):
        yield {"total": total, "finished": finished, "by_status": {"ok": finished},
               "last_key": TINY[0], "text": f"[{finished}/{total}] {TINY[0]} ok"}


def test_the_progress_bar_is_tqdms_which_picks_the_notebooks_widget(monkeypatch):
    from tqdm.auto import tqdm as auto
    from carb import _progress
    # tqdm.auto: the notebook's widget in a Jupyter kernel with ipywidgets, else the text bar
    # (on stderr, which a terminal and a notebook both show).
    assert _progress._tqdm is auto
    monkeypatch.setattr(_progress, "_tqdm", StandInBar)
    StandInBar.made.clear()
    bar = _progress.Progress(True, "carb profile keys")
    for state in states(3):
        bar(state)
    [made] = StandInBar.made
    assert (made.total, made.desc, made.unit) == (3, "carb profile keys", "config")
    assert made.n == 3 and made.postfix == "ok 3" and made.refreshed == 3
    bar.close()
    assert made.closed
    quiet = _progress.Progress(False, "carb profile keys")
    for state in states(2):
        quiet(state)
    quiet.close()
    assert len(StandInBar.made) == 1


@pytest.mark.parametrize("terminal", [True, False])
def test_without_tqdm_carbs_progress_line_shows(monkeypatch, capsys, terminal):
    from carb import _progress
    monkeypatch.setattr(_progress, "_tqdm", None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    bar = _progress.Progress(True, "carb profile keys")
    for state in states(60):
        bar(state)
    bar.close()
    err = capsys.readouterr().err
    if terminal:  # one line, rewritten in place
        assert err.count("\r\033[K") == 60 and err.endswith(f"[60/60] {TINY[0]} ok\n")
    else:  # every 50th and the last, a line each
        assert err.splitlines() == [f"[50/60] {TINY[0]} ok", f"[60/60] {TINY[0]} ok"]


CAMPAIGN = """
import json, sys
import carb
keys = {keys!r}
quick = dict(min_time=0.3, max_time=0.4, target_ci=1e-6, idle_window=0.1, drift_probe=None,
             timeout=60, progress=True)
try:
    carb.profile({db!r}, keys, **quick)
except KeyboardInterrupt:
    if not {catch!r}:
        raise
    # Stopped; this process resumes at once: the one in flight was released, not left claimed.
    kept = len(carb.measurements({db!r}))
    summary = carb.profile({db!r}, keys, **quick)
    print(json.dumps({{"kept": kept, "summary": summary}}))
"""


def measured_rows(db):
    """Rows in the database so far (read while the campaign writes it: WAL readers see
    committed rows)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
            return connection.execute("select count(*) from measurements").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def interrupt_after(db, process, rows):
    """SIGINT, as Ctrl-C sends it, once `rows` measurements are in."""
    deadline = time.monotonic() + 60
    while measured_rows(db) < rows:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the campaign measured too slowly"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=30)


def check_database(db, keys):
    with sqlite3.connect(db) as connection:
        assert connection.execute("pragma integrity_check").fetchone()[0] == "ok"
        assert connection.execute("select count(*) from claims").fetchone()[0] == 0
        statuses = [s for (s,) in connection.execute("select status from measurements")]
        # Every row whole: its samples all there.
        for count, samples in connection.execute(
                "select wall_count, (select count(*) from samples where measurement_id = m.id) "
                "from measurements m"):
            assert count == samples
    assert set(statuses) == {"ok"}
    return len(statuses)


def interrupted_campaign(db, keys, catch):
    """Runs CAMPAIGN in a python process, Ctrl-C's it after two measurements, and returns its
    exit code, stdout and stderr."""
    script = CAMPAIGN.format(keys=keys, db=str(db), catch=catch)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    out, err = interrupt_after(db, process, 2)
    return process.returncode, out, err


def test_ctrl_c_stops_the_campaign_and_loses_nothing(tmp_path):
    db = tmp_path / "interrupted.sqlite"
    code, _, err = interrupted_campaign(db, TINY[:8], catch=False)
    assert code != 0
    assert "KeyboardInterrupt" in err
    assert "carb: profile stopped" in err
    kept = check_database(db, TINY[:8])
    assert 2 <= kept < 8
    # Another process resumes: nothing measured twice, nothing left claimed.
    summary = carb.profile(db, TINY[:8], min_time=0.3, max_time=0.4, target_ci=1e-6,
                           idle_window=0.1, drift_probe=None, timeout=60, progress=False)
    assert summary["already_done"] == kept
    assert summary["claimed_elsewhere"] == 0
    assert summary["measured"] == {"ok": 8 - kept}
    assert check_database(db, TINY[:8]) == 8


def test_a_caught_ctrl_c_lets_the_same_process_resume(tmp_path):
    db = tmp_path / "caught.sqlite"
    code, out, err = interrupted_campaign(db, TINY[:6], catch=True)
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert 2 <= result["kept"] < 6
    assert result["summary"]["already_done"] == result["kept"]
    assert result["summary"]["claimed_elsewhere"] == 0
    assert result["summary"]["measured"] == {"ok": 6 - result["kept"]}
    assert check_database(db, TINY[:6]) == 6
