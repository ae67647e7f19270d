"""The package itself: its stubs name what the compiled module has, the error types, the GIL
released around long work, and `import carb` for Debian's python3 from any directory."""

import ast
import inspect
import os
import site
import subprocess
import threading
from pathlib import Path

import pytest

import carb
from carb import _carb
from conftest import CARB, QUICK_FIT, SOURCE


def stub_names(path):
    """Top-level names of a .pyi file, and each class's names."""
    tree = ast.parse(Path(path).read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            members[node.name] = {n.name if not isinstance(n, ast.AnnAssign) else n.target.id
                                  for n in node.body
                                  if isinstance(n, (ast.FunctionDef, ast.AnnAssign))}
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names, members


def test_the_stubs_name_exactly_what_the_compiled_module_has():
    names, members = stub_names(SOURCE / "python" / "carb" / "_carb.pyi")
    public = {n for n in dir(_carb) if not n.startswith("_")} | {"__version__"}
    assert names == public
    for cls, stubbed in members.items():
        have = {n for n in dir(getattr(_carb, cls)) if not n.startswith("_")}
        if cls in ("InputError", "CarbRuntimeError"):
            have = {"subject", "exit_code"}
        else:
            stubbed = stubbed - {"__init__"}
        assert stubbed == have, cls
    # The package's own functions carry annotations: what editors complete from.
    for name in carb.__all__:
        value = getattr(carb, name)
        if inspect.isfunction(value):
            assert value.__annotations__.get("return") is not None, name
    assert (Path(carb.__file__).parent / "py.typed").exists()
    assert (Path(carb.__file__).parent / "_carb.pyi").exists()


def test_the_version_and_constants_are_the_builds(reference_db):
    version = subprocess.run([CARB, "--version"], capture_output=True, text=True).stdout
    assert version.strip() == f"carb {carb.__version__} ({carb.git_commit})"
    assert carb.BLOCKS == ("basic", "bottleneck")
    assert carb.PRECISIONS == ("fp32", "fp16", "bf16")
    assert carb.features(carb.DEFAULT_DRIFT_PROBE)["key"][0] == carb.DEFAULT_DRIFT_PROBE
    assert set(carb.__all__) <= set(dir(carb))
    space = carb.load_space(SOURCE / "examples" / "spaces" / "paper.yaml")
    assert repr(space) == "<carb.Space paper: 17280 grid points>"


def test_errors_are_value_and_runtime_errors(reference_db):
    assert issubclass(carb.InputError, ValueError)
    assert issubclass(carb.CarbRuntimeError, RuntimeError)
    assert not issubclass(carb.InputError, RuntimeError)
    with pytest.raises(ValueError) as raised:
        carb.layers("not a key")
    assert raised.value.exit_code == 2 and raised.value.subject == ""
    assert "\n" not in str(raised.value)
    # The package's own checks raise the same type, with the same attributes.
    with pytest.raises(carb.InputError) as raised:
        carb.load_space(SOURCE / "examples" / "spaces" / "paper.yaml").feature_chunks(0).__next__()
    assert raised.value.subject == "chunk_size" and raised.value.exit_code == 2
    # A runtime failure: a report that cannot be written (its folder does not exist).
    with pytest.raises(carb.CarbRuntimeError) as raised:
        carb.report(reference_db, "/nonexistent-folder/report.html", fit=False)
    assert str(raised.value) == "/nonexistent-folder/report.html: cannot write"
    assert raised.value.exit_code == 1


def test_long_work_releases_the_gil(reference_db):
    """While a fit runs in a thread, this thread keeps running Python."""
    done = threading.Event()

    def work():
        carb.fit(reference_db, **QUICK_FIT)
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    turns = 0
    while not done.is_set():
        turns += 1
    thread.join()
    assert turns > 100000


def test_import_carb_works_for_debians_python_from_any_directory():
    """scripts/build.sh (the README's commands) writes carb.pth into Debian's site directory."""
    pth = Path(site.getsitepackages()[0]) / "carb.pth"
    if not pth.exists():
        pytest.skip(f"{pth} is not written: scripts/install-python.sh writes it")
    named = Path(pth.read_text().strip())
    assert (named / "carb" / "__init__.py").exists(), named
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(["/usr/bin/python3", "-c", "import carb; print(carb.__file__)"],
                            cwd="/", env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).parent == named / "carb"
