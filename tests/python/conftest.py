"""What the Python module's tests share: the checkout, the carb binary of the same build (the
command line the module is compared with), the reference campaign unpacked, and quick fits."""

import json
import lzma
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("CARB_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CARB = os.environ.get("CARB_BINARY", str(SOURCE / "build" / "src" / "cli" / "carb"))
SPACES = SOURCE / "examples" / "spaces"

# A fit quick enough for tests, whose accuracy no test looks at; the same options on both sides
# when the module and the command line are compared.
QUICK_FIT = dict(seed=1, threads=1, fixed_rounds=10, forest_trees=4)
QUICK_FIT_FLAGS = ["--seed", "1", "--threads", "1", "--fixed-rounds", "10", "--forest-trees", "4"]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; runs only in slow.python")


def run_cli(*args, check=True, cwd=None):
    """Runs the carb binary; returns the CompletedProcess (text)."""
    result = subprocess.run([CARB, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if check and result.returncode != 0:
        raise AssertionError(f"carb {' '.join(map(str, args))} failed ({result.returncode}):\n"
                             f"{result.stderr}")
    return result


def cli_error(*args):
    """The one line `carb` prints for a failing command, without "carb: error: ", and its
    exit code."""
    result = run_cli(*args, check=False)
    assert result.returncode in (1, 2), result
    lines = [line for line in result.stderr.splitlines() if line.startswith("carb: error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0][len("carb: error: "):], result.returncode


def cli_json(*args):
    return json.loads(run_cli(*args).stdout)


@pytest.fixture(scope="session")
def reference_db(tmp_path_factory):
    """data/cpu-reference.sqlite: 1,600 configurations measured on a CPU without an energy
    sensor (data/README.md)."""
    path = tmp_path_factory.mktemp("data") / "cpu-reference.sqlite"
    with lzma.open(SOURCE / "data" / "cpu-reference.sqlite.xz") as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    return path


@pytest.fixture(scope="session")
def cli_model(reference_db, tmp_path_factory):
    """A model of the reference campaign fitted by the command line (quick options)."""
    path = tmp_path_factory.mktemp("models") / "cli-model.json"
    run_cli("fit", "--db", reference_db, *QUICK_FIT_FLAGS, "-o", path, "--format", "json")
    return path
