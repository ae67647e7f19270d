"""carb from Python: the cost (energy, latency, peak memory) of CNN configurations, predicted,
screened and measured, with pandas DataFrames and numpy arrays in and out.

A thin layer over carb's C++ libraries (the compiled ``carb._carb``): every number comes from the
same code as the ``carb`` command line. docs/python.md walks through it.

Errors raise :class:`InputError` (a ``ValueError``: bad input, a bad argument) or
:class:`CarbRuntimeError` (a ``RuntimeError``: the environment, a database, a library), each with
the command line's one-line message; where the command line names a flag, the message names the
parameter, also in the exception's ``subject``.
"""

from __future__ import annotations

import datetime as _datetime
import json as _json
import os as _os
import sys as _sys
import warnings as _warnings
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import numpy as np
import pandas as pd

# carb's functions are made global as the module loads: the PyTorch backend (docs/torch.md) is a
# module carb opens on demand, which takes them from whatever loaded it, as it takes them from the
# carb executable.
_dlopen_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_dlopen_flags | _os.RTLD_GLOBAL)
try:
    from . import _carb
finally:
    _sys.setdlopenflags(_dlopen_flags)
from ._carb import CarbRuntimeError, FitOptions, InputError, Protocol  # noqa: E402
from ._progress import Progress as _Progress  # noqa: E402

__version__: str = _carb.__version__
#: The git commit carb was built from.
git_commit: str = _carb.git_commit
#: Block types by code, as numpy feature arrays hold them (``block`` column).
BLOCKS: Tuple[str, ...] = tuple(_carb.BLOCKS)
#: Precisions by code, as numpy feature arrays hold them (``precision`` column).
PRECISIONS: Tuple[str, ...] = tuple(_carb.PRECISIONS)
#: The configuration a campaign measures briefly every ``drift_every`` seconds by default.
DEFAULT_DRIFT_PROBE: str = _carb.DEFAULT_DRIFT_PROBE

__all__ = [
    "BLOCKS", "CarbRuntimeError", "DEFAULT_DRIFT_PROBE", "InputError", "Model", "PRECISIONS",
    "Space", "characterize", "devices", "evaluate", "features", "fit", "git_commit", "layers",
    "load_model",
    "kernels", "load_space", "measurements", "profile", "report", "screen",
]

PathLike = Union[str, "_os.PathLike[str]"]


def _input_error(message: str, subject: str = "") -> InputError:
    """An InputError raised by the package itself, with the attributes carb's own have."""
    error = InputError(message)
    error.subject = subject
    error.exit_code = 2
    return error

Keys = Union[str, Sequence[str], "pd.Series"]


def _frame(columns: Mapping[str, Any], index: Any = None) -> pd.DataFrame:
    """A DataFrame of carb's columns: block and precision codes become categoricals."""
    data = dict(columns)
    for name, categories in (("block", BLOCKS), ("precision", PRECISIONS)):
        column = data.get(name)
        if isinstance(column, np.ndarray) and column.dtype in (np.uint8, np.int8):
            # -1: an imported architecture has no block (NaN in the categorical).
            data[name] = pd.Categorical.from_codes(column, categories=list(categories))
    column = data.get("early_downsample")
    if isinstance(column, np.ndarray) and column.dtype == np.int8:
        # -1: an imported architecture has no such knob (None, as NULL is).
        data["early_downsample"] = (column.astype(bool) if (column >= 0).all() else
                                    np.array([None if v < 0 else bool(v) for v in column],
                                             dtype=object))
    return pd.DataFrame(data, index=index)


def _keys_of(candidates: Any) -> Optional[List[str]]:
    """Configuration keys of a key, a sequence of keys, a Series of keys, or a DataFrame with a
    ``key`` or ``configuration_key`` column; None for anything else."""
    if isinstance(candidates, str):
        return [candidates]
    if isinstance(candidates, pd.DataFrame):
        for column in ("key", "configuration_key"):
            if column in candidates.columns:
                return [str(key) for key in candidates[column]]
        return None
    if isinstance(candidates, (pd.Series, list, tuple, np.ndarray)):
        keys = list(candidates)
        if all(isinstance(key, str) for key in keys):
            return keys
    return None


# --------------------------------------------------------------------------------------------
# Spaces


class Space:
    """A design space (a YAML spec, docs/spaces.md): its points are addressed by index and never
    materialised. Load one with :func:`load_space` or :meth:`Space.from_yaml`."""

    def __init__(self, handle: Any, path: Optional[str] = None, text: Optional[str] = None):
        self._handle = handle
        self.path = path
        self._text = text

    @classmethod
    def load(cls, path: PathLike) -> "Space":
        """Reads a spec file; a bad one raises InputError with file:line:column."""
        path = _os.fspath(path)
        return cls(_carb.Space.from_file(path), path=path)

    @classmethod
    def from_yaml(cls, text: str, name: str = "<yaml>") -> "Space":
        """Parses spec text; errors name ``name`` as the file."""
        return cls(_carb.Space.from_yaml(text, name), text=text)

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def grid_points(self) -> int:
        """Points of the grid, constraints not applied."""
        return self._handle.size

    @property
    def constraints(self) -> Dict[str, float]:
        """The spec's constraints, e.g. ``{"max_flops": 5e9}``."""
        return self._handle.constraints

    @property
    def axes(self) -> List[Dict[str, Any]]:
        """The knobs in index order (the last varies fastest): name, values, labels."""
        return self._handle.axes

    @property
    def text(self) -> str:
        """The spec as written (what a campaign keeps with its measurements)."""
        if self._text is None:
            with open(self.path, encoding="utf-8") as spec:
                self._text = spec.read()
        return self._text

    def __repr__(self) -> str:
        return f"<carb.Space {self.name}: {self.grid_points} grid points>"

    def count(self) -> Optional[int]:
        """The points that meet the constraints (``carb space count``); None when the space has
        constraints and over 10^9 grid points to check."""
        return self._handle.count()

    def sample(self, n: int, seed: int = 0, sampling: str = "random") -> np.ndarray:
        """``n`` distinct indices of points meeting the constraints, drawn ``random``ly or
        ``stratified`` (every knob's values balanced), in draw order; all of them when there are
        fewer."""
        return self._handle.sample(int(n), int(seed), sampling)

    def indices(self, sample: Optional[int] = None, seed: int = 0,
                sampling: str = "random") -> np.ndarray:
        """A sample's indices, or every point meeting the constraints in index order."""
        if sample is not None:
            return self.sample(sample, seed, sampling)
        return self._handle.accepted(0, self.grid_points)

    def keys(self, indices: Optional[Iterable[int]] = None) -> List[str]:
        """The configuration keys of points by index (default: every point)."""
        chosen = self.indices() if indices is None else np.asarray(indices, dtype=np.uint64)
        return self._handle.keys(chosen)

    def features(self, sample: Optional[int] = None, seed: int = 0, sampling: str = "random",
                 indices: Optional[Iterable[int]] = None,
                 roofline: Optional[str] = None) -> pd.DataFrame:
        """Knobs and analytic features of points (``carb space features``: a sample, given
        indices, or the whole space), one row each with its key. ``roofline="TFLOPS:GBPS"`` adds
        a roofline time."""
        chosen = (self.indices(sample, seed, sampling) if indices is None
                  else np.asarray(indices, dtype=np.uint64))
        return _frame(self._handle.features(chosen, roofline, True))

    def list(self, sample: Optional[int] = None, seed: int = 0,
             sampling: str = "random") -> pd.DataFrame:
        """The configurations (``carb space list``): key, knobs and index."""
        frame = self.features(sample, seed, sampling)
        return frame[["key", "architecture", "block", "depth", "width", "early_downsample", "resolution", "batch",
                      "precision", "index"]]

    def feature_arrays(self, indices: Optional[Iterable[int]] = None,
                       roofline: Optional[str] = None,
                       keys: bool = False) -> Dict[str, np.ndarray]:
        """Features of many points at once as numpy arrays, no text on the way (``block`` and
        ``precision`` as codes into :data:`BLOCKS` and :data:`PRECISIONS`; ``keys=True`` adds the
        keys and stage lists as lists of str). Default: every point meeting the constraints."""
        if indices is None:
            return self._handle.features_range(0, self.grid_points, roofline, keys)
        return self._handle.features(np.asarray(indices, dtype=np.uint64), roofline, keys)

    def feature_chunks(self, chunk_size: int = 1 << 18, indices: Optional[Iterable[int]] = None,
                       roofline: Optional[str] = None,
                       keys: bool = False) -> Iterator[Dict[str, np.ndarray]]:
        """:meth:`feature_arrays` in chunks, for spaces too large to hold: each chunk covers
        ``chunk_size`` grid points (or given indices) and holds those meeting the constraints."""
        if chunk_size < 1:
            raise _input_error("chunk_size must be at least 1", "chunk_size")
        if indices is not None:
            chosen = np.asarray(indices, dtype=np.uint64)
            for start in range(0, len(chosen), chunk_size):
                yield self._handle.features(chosen[start:start + chunk_size], roofline, keys)
            return
        for start in range(0, self.grid_points, chunk_size):
            yield self._handle.features_range(start, start + chunk_size, roofline, keys)


def load_space(path: PathLike) -> Space:
    """Reads a design-space spec (YAML, docs/spaces.md)."""
    return Space.load(path)


def features(keys: Keys, roofline: Optional[str] = None) -> pd.DataFrame:
    """Knobs and analytic features of configurations by key (``carb space show KEY``)."""
    chosen = _keys_of(keys)
    if chosen is None:
        raise _input_error("keys: give a configuration key or a sequence of them", "keys")
    return _frame(_carb.key_features(chosen, roofline))


def layers(key: str) -> pd.DataFrame:
    """A configuration's network layer by layer, with torchvision's module names
    (``carb space show KEY --layers``)."""
    return pd.DataFrame(_carb.layers(key))


# --------------------------------------------------------------------------------------------
# Models


def _fit_options(**given: Any) -> FitOptions:
    """carb's fit options, with those given (None: carb's default)."""
    options = FitOptions()
    for name, value in given.items():
        if value is not None:
            setattr(options, name, value)
    return options


# Score tables' columns (fit's test split, evaluate), as carb fit and carb evaluate print them.
_SCORE_COLUMNS = ["target", "method", "n", "r2", "mae", "mape_pct", "within10_pct", "spearman",
                  "slope", "coverage_pct", "mean_width"]


class Model:
    """A fitted CARB predictor of one device (or of a table): :func:`fit` or :func:`load_model`.

    After :func:`fit`, ``scores`` holds the test split's scores (``carb fit``'s table) and
    ``data`` what the rows were (count, device, drift correction, host instances)."""

    def __init__(self, handle: Any, path: Optional[str] = None,
                 data: Optional[Dict[str, Any]] = None):
        self._handle = handle
        self.path = path
        self.data = data
        #: After ``fit(source=...)``: per target, the correction chosen and why (``carb fit
        #: --from``'s report), and with ``rows=K`` the held-out scores (``scores``,
        #: ``scores_new_to_source``: DataFrames as :func:`evaluate`'s); None otherwise.
        self.transfer: Optional[Dict[str, Any]] = None

    @classmethod
    def load(cls, path: PathLike) -> "Model":
        """Reads a model file; one that is not a carb model raises InputError."""
        path = _os.fspath(path)
        return cls(_carb.Model.load(path), path=path)

    def save(self, path: PathLike) -> None:
        """Writes the model file (JSON)."""
        path = _os.fspath(path)
        self._handle.save(path)
        self.path = path

    def to_json(self) -> str:
        return self._handle.to_json()

    @property
    def device_name(self) -> str:
        return self._handle.device_name

    @property
    def device_fingerprint(self) -> str:
        return self._handle.device_fingerprint

    @property
    def schema(self) -> str:
        """``carb-ir-5`` for a model of configurations, ``table`` for one of a table,
        ``kernels`` for a kernel model (``fit(kernels=...)``)."""
        return self._handle.schema

    @property
    def kernel_pass_interval(self) -> Optional[Dict[str, Any]]:
        """A kernel model's whole-pass interval: ``half_width`` (of log latency), ``factor``
        (its exp: predictions are x/factor), and the held-out ``configurations`` and
        ``architectures`` it was calibrated on; None for other models and for a kernel model
        whose intervals are its kernels' bounds summed (docs/onnx.md, "Kernel model")."""
        return self._handle.kernel_pass_interval

    @property
    def feature_names(self) -> List[str]:
        return self._handle.feature_names

    @property
    def targets(self) -> List[Dict[str, str]]:
        """Each target's name, unit and source column, in cascade order."""
        return self._handle.targets

    @property
    def coverage(self) -> float:
        """Nominal coverage of the prediction intervals."""
        return self._handle.coverage

    @property
    def transferred(self) -> bool:
        """Whether it was transferred from another device's model (``carb fit --from``)."""
        return self._handle.transferred

    @property
    def drift(self) -> Dict[str, Any]:
        """The drift correction its latencies were fitted with (``applied``, probe, reference)."""
        return self._handle.drift

    @property
    def instances(self) -> Dict[str, int]:
        """Rows per host instance the model was fitted on."""
        return self._handle.instances

    @property
    def scores(self) -> pd.DataFrame:
        """The test split's scores recorded at fit time, one row per target and method."""
        report = self._handle.fit_report()
        return pd.DataFrame(report["scores"], columns=_SCORE_COLUMNS)

    @property
    def fit_report(self) -> Dict[str, Any]:
        """The split's sizes, the scores, the notes, the fit's seconds and ``fitted_ids``."""
        return self._handle.fit_report()

    @property
    def fitted_keys(self) -> List[str]:
        """The configurations (or table lines) it was fitted on: its train, validation and
        calibration rows; the rest of its data is its test split."""
        return list(self._handle.fit_report()["fitted_ids"])

    def __repr__(self) -> str:
        where = f" ({self.path})" if self.path else ""
        return f"<carb.Model of {self.device_name or 'a table'}{where}>"

    def predict(self, data: Any, *, indices: Optional[Iterable[int]] = None,
                sample: Optional[int] = None, seed: int = 0, sampling: str = "random",
                plan_memory: bool = True, domain: bool = False) -> pd.DataFrame:
        """Each target's prediction with its interval (``carb predict``): columns
        ``TARGET_UNIT``, ``TARGET_UNIT_low``, ``TARGET_UNIT_high``; NaN where the model cannot
        predict a target (``attrs["unavailable"]`` says why).

        ``data``: a key, a sequence or Series of keys, a DataFrame with a ``key`` (or
        ``configuration_key``) column, a :class:`Space` (whole, ``indices``, or a ``sample``), or,
        for a model of a table, a DataFrame with the model's feature columns. A kernel model
        predicts configurations' latency by summing their planned kernels (``carb predict``).

        ``plan_memory``: where this machine runs the model's engine, memory of up to 10,000
        configurations is the engine's own plan, exact, as ``carb predict`` does
        (``attrs["memory_planned"]``). ``domain=True`` adds ``inside_domain`` and
        ``domain_distance`` (docs/model.md, "Training domain")."""
        index = None
        if isinstance(data, Space):
            chosen = (data.indices(sample, seed, sampling) if indices is None
                      else np.asarray(indices, dtype=np.uint64))
            columns = self._handle.predict_space(data._handle, chosen, plan_memory, domain)
        elif self.schema == "table":
            if not isinstance(data, pd.DataFrame):
                raise _input_error("this model was fitted on a table: predict from a DataFrame "
                                   "of its feature columns")
            header, rows = _cells(data)
            columns = self._handle.predict_table(header, rows, "<DataFrame>", domain)
            index = data.index
        else:
            keys = _keys_of(data)
            if keys is None:
                raise _input_error("predict takes keys, a DataFrame with a key column, or a Space")
            columns = self._handle.predict_keys(keys, plan_memory, domain)
            if isinstance(data, (pd.DataFrame, pd.Series)):
                index = data.index
        unavailable = columns.pop("unavailable")
        planned = columns.pop("memory_planned")
        engine = columns.pop("engine")
        ordered = {}
        for name in ("key", "architecture"):
            if name in columns:
                ordered[name] = columns.pop(name)
        ordered.update(columns)
        if "index" in ordered:
            ordered["index"] = ordered.pop("index")
        frame = pd.DataFrame(ordered, index=index)
        frame.attrs.update({"unavailable": dict(unavailable), "memory_planned": planned,
                            "engine": engine, "model": self.path})
        return frame


def load_model(path: PathLike) -> Model:
    """Reads a model file (``carb fit -o``'s)."""
    return Model.load(path)


def _cell(value: Any) -> str:
    """A table cell as carb reads CSV: numbers that read back exactly, NaN/None empty."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return str(value)


def _cells(frame: pd.DataFrame) -> Tuple[List[str], List[List[str]]]:
    """A DataFrame as a table's header and rows of text (row r as line r + 2 of a CSV file)."""
    header = [str(column) for column in frame.columns]
    rows = [[_cell(value) for value in row] for row in frame.itertuples(index=False, name=None)]
    return header, rows


def _measured_columns(frame: pd.DataFrame,
                      device: Optional[str]) -> Tuple[Dict[str, Any], str, str]:
    """The measured targets of a DataFrame of measurements (:func:`measurements`' columns, or
    ``key`` with ``memory_B``, ``energy_J``, ``latency_ms``) for fit."""
    if "status" in frame.columns:
        frame = frame[frame["status"] == "ok"]
    fingerprint, name = "", ""
    if "device_fingerprint" in frame.columns:
        fingerprints = sorted(set(frame["device_fingerprint"]))
        if device:
            frame = frame[(frame["device_fingerprint"] == device) |
                          (frame.get("device_name", frame["device_fingerprint"]) == device)]
            fingerprints = sorted(set(frame["device_fingerprint"]))
        if len(fingerprints) > 1:
            raise _input_error("device: the measurements hold several devices; give one of: " +
                               ", ".join(fingerprints), "device")
        if fingerprints:
            fingerprint = fingerprints[0]
            if "device_name" in frame.columns:
                name = str(frame["device_name"].iloc[0])
    key_column = "configuration_key" if "configuration_key" in frame.columns else "key"
    if key_column not in frame.columns:
        raise _input_error("the DataFrame has no key or configuration_key column")

    def numbers(*names: str) -> np.ndarray:
        for column in names:
            if column in frame.columns:
                return frame[column].to_numpy(dtype=float, na_value=np.nan)
        return np.full(len(frame), np.nan)

    # Latency as carb fit reads a database: the device clock's median where it has one.
    latency = numbers("latency_ms")
    if "latency_ms" not in frame.columns:
        wall, on_device = numbers("wall_median_ms"), numbers("device_median_ms")
        latency = np.where(np.isnan(on_device), wall, on_device)

    def texts(column: str) -> List[str]:
        if column not in frame.columns:
            return [""] * len(frame)
        return ["" if value is None or value != value else str(value) for value in frame[column]]

    instance = ["" for _ in range(len(frame))]
    if "provenance" in frame.columns:
        instance = [_json.loads(p).get("host", {}).get("instance", "") if isinstance(p, str)
                    else "" for p in frame["provenance"]]
    columns = dict(keys=[str(k) for k in frame[key_column]], latency_ms=latency,
                   memory_bytes=numbers("engine_peak_bytes", "memory_B"),
                   energy_j=numbers("energy_j", "energy_J"),
                   energy_null_reason=texts("energy_null_reason"),
                   finished_at=texts("finished_at"), instance=instance)
    return columns, fingerprint, name


def fit(data: Any = None, *, db: Optional[PathLike] = None, device: str = "",
        drift: Optional[str] = None, instance: str = "",
        features: Optional[Sequence[str]] = None,
        targets: Optional[Union[Sequence[str], Mapping[str, str]]] = None,
        stratify: Sequence[str] = (), batch_column: str = "",
        output: Optional[PathLike] = None, seed: Optional[int] = None,
        coverage: Optional[float] = None, prior: Optional[str] = None,
        cascade: Optional[bool] = None, corrector: Optional[bool] = None,
        threads: Optional[int] = None, learning_rate: Optional[float] = None,
        forest_trees: Optional[int] = None, fixed_rounds: Optional[int] = None,
        leave_low_batch_out: Optional[bool] = None,
        baselines: Optional[bool] = None,
        source: Union["Model", Sequence["Model"], None] = None,
        rows: Optional[int] = None, choose: str = "spread", kernels: Any = None) -> Model:
    """Fits the CARB predictor (``carb fit``; docs/model.md).

    With ``source`` (a model of another device, or of the families it saw), the database's
    device is fitted from it and the database's rows (``carb fit --from``; docs/model.md,
    "Transfer"): ``seed``, ``coverage`` and ``threads`` apply, the model's ``transfer`` says
    which correction each target got and why. A list of models is the source, then further
    sources whose predictions join the first's in the ``sources`` candidate (``carb fit --from A
    --from B``). ``rows=K`` fits it on K of the rows, chosen
    ``choose="spread"`` over the source's predictions (what ``carb profile --transfer-for``
    measures) or ``"random"``, seeded by ``seed``, and scores it on the rest (``carb fit --from
    --rows K --choose``): ``transfer["scores"]`` on all of them,
    ``transfer["scores_new_to_source"]`` on those new to the source (on the others its
    predictions are in-sample).

    From a database: ``fit(db="runs.sqlite")`` (or ``fit("runs.sqlite")``), with ``device``,
    ``drift`` (auto, on, off) and ``instance`` as ``carb fit`` takes them. From a DataFrame of
    measurements (:func:`measurements`' or one with ``key``, ``memory_B``, ``energy_J``,
    ``latency_ms``): its ok rows, latencies as measured. From a table: a DataFrame with
    ``features=[...]`` and ``targets`` (``["y"]``, ``["name=column"]`` or ``{"name": "column"}``)
    in cascade order, ``stratify`` and ``batch_column`` as ``carb fit --table`` takes them.

    A kernel model (``carb fit --kernels``; docs/onnx.md, "Kernel model"): ``kernels`` is one or
    a list of :func:`kernels` DataFrames or ``carb kernels --format csv`` files. Configurations
    the timings leave out (those that ran a oneDNN reference kernel) are reported as warnings;
    ``kernel_pass_interval`` says how its whole-pass intervals were calibrated (None: they were
    not, and a note in ``fit_report`` says why). Its timings are fitted as measured unless
    ``drift`` says otherwise (None: ``"off"`` for kernels, ``"auto"`` for a database), as ``carb
    fit --kernels`` does.

    The options default to carb's (None); ``output`` writes the model file."""
    options = _fit_options(seed=seed, coverage=coverage, prior=prior, cascade=cascade,
                           corrector=corrector, threads=threads, learning_rate=learning_rate,
                           forest_trees=forest_trees, fixed_rounds=fixed_rounds,
                           leave_low_batch_out=leave_low_batch_out, baselines=baselines)
    if kernels is not None:
        if data is not None or db is not None or source is not None:
            raise _input_error("kernels= fits a kernel model alone: no data, db or source",
                               "kernels")
        given = kernels if isinstance(kernels, (list, tuple)) else [kernels]
        paths = [_os.fspath(k) for k in given if isinstance(k, (str, _os.PathLike))]
        frames = [_cells(k) for k in given if isinstance(k, pd.DataFrame)]
        if not given or len(paths) + len(frames) != len(given):
            raise _input_error("kernels takes carb.kernels DataFrames or carb kernels CSV files",
                               "kernels")
        handle, report, info = _carb.fit_kernels(paths, frames, options, drift or "off")
        model = Model(handle, data=info)
        kept = set(model.fit_report["notes"])
        for note in report["notes"]:  # what the timings left out (carb fit's "note:" lines)
            if note not in kept:
                _warnings.warn(note, stacklevel=2)
        if output is not None:
            model.save(output)
        return model
    if isinstance(data, (str, _os.PathLike)) and db is None:
        db, data = data, None
    if (db is None) == (data is None):
        raise _input_error("give either a database (db=) or a DataFrame")
    if rows is not None and (source is None or isinstance(rows, bool) or
                             not isinstance(rows, int) or rows < 1):
        raise _input_error("rows= takes a positive number of rows, and goes with source=", "rows")
    if source is not None:
        if db is None:
            raise _input_error("a transfer (source=) fits a database's device: give db=",
                               "source")
        sources = list(source) if isinstance(source, (list, tuple)) else [source]
        if not sources or not all(isinstance(s, Model) for s in sources):
            raise _input_error("source= takes a model or a list of models", "source")
        handle, transfer, info = _carb.transfer_store(
            sources[0]._handle, _os.fspath(db), device, drift or "auto", instance,
            options.seed, options.coverage, options.threads, rows or 0, choose,
            [s._handle for s in sources[1:]])
        if rows is not None and rows >= info["rows"]:
            _warnings.warn(f"rows={rows} but the database holds {info['rows']} measured "
                           f"configurations of {info['device']}: fitted on all of them, none "
                           "left to score", stacklevel=2)
        for name in ("scores", "scores_new_to_source"):
            transfer[name] = pd.DataFrame(transfer[name], columns=_SCORE_COLUMNS)
        model = Model(handle, data=info)
        model.transfer = transfer
        if output is not None:
            model.save(output)
        return model
    if db is not None:
        handle, _, info = _carb.fit_store(_os.fspath(db), device, drift or "auto", instance,
                                          options)
    elif not isinstance(data, pd.DataFrame):
        raise _input_error("fit takes a database path or a DataFrame")
    elif features is not None or targets is not None:
        if isinstance(targets, Mapping):
            target_texts = [f"{name}={column}" for name, column in targets.items()]
        else:
            target_texts = list(targets or [])
        header, rows = _cells(data)
        handle, _, info = _carb.fit_table(header, rows, "<DataFrame>", list(features or []),
                                          target_texts, list(stratify), batch_column, options)
    else:
        columns, fingerprint, name = _measured_columns(data, device)
        handle, _, info = _carb.fit_measured(fingerprint=fingerprint, name=name, options=options,
                                             **columns)
    model = Model(handle, data=info)
    if output is not None:
        model.save(output)
    return model


def evaluate(model: Model, data: Any, *, device: str = "", drift: str = "auto",
             instance: str = "", batch_column: str = "") -> pd.DataFrame:
    """Scores a model on a database's measurements, as ``carb evaluate --db`` does: one row per
    target and method (carb, then each member alone).

    A model fitted on a table is scored on a DataFrame holding the columns it was fitted on, as
    ``carb evaluate --table`` does: its features read in the model's layout whatever span these
    rows have, its targets from their columns, batch sizes from ``batch_column`` as ``fit`` took
    it. ``attrs`` then holds ``data`` alone.

    The rows are ``device``'s, or, where it is empty, the model's own device when the database
    has it, else the database's only device (a transfer evaluation: R², Spearman and slope say
    how far the model carries). ``drift="auto"`` divides latencies by the drift only where the
    model's fit did. Where this machine runs the model's engine, carb's memory is the engine's
    plan and the model's own estimate is the method ``memory-model``.

    ``attrs``: ``same_fingerprint`` (the data's device is the model's), ``memory_planned``,
    ``distance`` (per target, the geometric mean of measured / predicted and its range) and
    ``data`` (rows, device, drift correction, host instances). On its own device the model may
    have been fitted on some of the rows: its ``scores`` (the test split) are the honest ones."""
    if isinstance(data, pd.DataFrame):
        header, rows = _cells(data)
        scores, info = _carb.evaluate_table(model._handle, header, rows, "<DataFrame>",
                                            batch_column)
        frame = pd.DataFrame(scores, columns=_SCORE_COLUMNS)
        frame.attrs["data"] = info
        return frame
    if not isinstance(data, (str, _os.PathLike)):
        raise _input_error("evaluate takes a database path or, for a table's model, a DataFrame",
                           "data")
    result, info = _carb.evaluate_store(model._handle, _os.fspath(data), device, drift, instance)
    frame = pd.DataFrame(result["scores"], columns=_SCORE_COLUMNS)
    frame.attrs.update({"same_fingerprint": result["same_fingerprint"],
                        "memory_planned": result["memory_planned"],
                        "distance": result["distance"], "data": info})
    return frame


# --------------------------------------------------------------------------------------------
# Screening


def _value_objective(value: Any) -> Dict[str, Any]:
    """screen's value= as the binding takes it: a file's column (``"FILE:COLUMN"``, carb reads
    and checks it), or values by key."""
    if value is None or isinstance(value, str):
        return dict(value=value or "", values=None, values_name="value")
    if isinstance(value, tuple) and len(value) == 2:
        return dict(value=f"{_os.fspath(value[0])}:{value[1]}", values=None, values_name="value")
    if isinstance(value, pd.Series):
        return dict(value="", values={str(k): float(v) for k, v in value.items()},
                    values_name=str(value.name) if value.name is not None else "value")
    if isinstance(value, Mapping):
        return dict(value="", values={str(k): float(v) for k, v in value.items()},
                    values_name="value")
    raise _input_error("value takes 'FILE:COLUMN', (file, column), a Series or a dict by key",
                       "value")


def screen(model: Model, candidates: Any, *, budget: Optional[str] = None,
           maximize: Optional[str] = "macs", value: Any = None,
           objectives: Optional[str] = None, outside_domain: str = "widen", keep: int = 2000,
           keep_fraction: float = 0.0, safe: bool = False, rank: Optional[str] = None,
           stage1_model: Optional[Model] = None, kernel_model: Optional[Model] = None,
           sample: Optional[int] = None, seed: int = 0,
           sampling: str = "random", json: Optional[PathLike] = None,
           all_candidates: bool = False) -> Union[pd.DataFrame, Tuple[pd.DataFrame, pd.DataFrame]]:
    """Two-stage screening to a ranked Pareto shortlist (``carb screen``; docs/screening.md).

    ``candidates``: a :class:`Space` (every point, or a ``sample``) or keys. ``budget`` as
    ``"latency<=2ms,memory<=32MiB"``; the value to maximise: ``maximize`` (macs, flops, params,
    depth, width or None) or ``value`` (``"file.csv:column"``, ``(file, column)``, or a Series or
    dict of values by configuration or network key; not with another ``maximize``). Returns the
    ranked front, best first (``rank``, ``key``, ``value_NAME``, ``p_feasible``, each cost with
    its interval, ``inside_domain``); ``attrs`` hold the counts (``counts``) and the whole result
    as JSON (``screening``, what :func:`report` draws). ``json`` writes that file as ``carb
    screen --json`` does. ``all_candidates=True`` also returns every candidate stage 2 scored.
    ``kernel_model`` (a model :func:`fit` with ``kernels=``) prices stage 2's latency from each
    candidate's planned kernels (``carb screen --kernel-model``)."""
    space = candidates if isinstance(candidates, Space) else None
    keys = None
    if space is not None and sample is not None:
        keys, space = candidates.keys(candidates.sample(sample, seed, sampling)), None
    elif space is None:
        keys = _keys_of(candidates)
        if keys is None:
            raise _input_error("screen takes a Space or configuration keys")
    given = _value_objective(value)
    options = _carb.ScreenOptions()
    options.budget, options.objectives = budget or "", objectives or ""
    options.maximize = ("none" if value is None else "macs") if maximize is None else maximize
    options.value, options.rank, options.outside_domain = given["value"], rank or "", outside_domain
    options.keep, options.keep_fraction, options.safe = keep, keep_fraction, safe
    result = _carb.screen(model._handle, None if stage1_model is None else stage1_model._handle,
                          None if kernel_model is None else kernel_model._handle,
                          None if space is None else space._handle, keys, options,
                          given["values"], given["values_name"])
    shortlist = pd.DataFrame(result["shortlist"])
    shortlist.insert(0, "rank", np.arange(1, len(shortlist) + 1))
    shortlist = shortlist.drop(columns=["feasible"])
    screening = _json.loads(result["json"])
    screening["model"] = model.path or "(a model fitted in Python)"
    screening["stage1_model"] = (stage1_model.path if stage1_model is not None else
                                 screening["model"])
    screening["kernel_model"] = (None if kernel_model is None else
                                 kernel_model.path or "(a model fitted in Python)")
    text = _json.dumps(screening, indent=1)
    shortlist.attrs.update({"counts": result["counts"], "value": result["value"],
                            "rank": result["rank"], "feasible": result["feasible"],
                            "front": result["front"], "first_outside": result["first_outside"],
                            "screening": text})
    if json is not None:
        with open(_os.fspath(json), "w", encoding="utf-8") as out:
            out.write(text + "\n")
    if all_candidates:
        frame = pd.DataFrame(result["candidates"])
        frame["front_rank"] = frame["front_rank"].replace(0, np.nan)
        return shortlist, frame
    return shortlist


# --------------------------------------------------------------------------------------------
# Databases and campaigns


def measurements(db: PathLike, ok_only: bool = False) -> pd.DataFrame:
    """Every measurement of a database (``carb export``): knobs, analytic features, measured
    columns, provenance. NULL is NaN in a numeric column and None in a text or boolean one,
    never 0 (energy on a machine without a sensor)."""
    names, kinds, data = _carb.measurements(_os.fspath(db), ok_only)
    frame = pd.DataFrame({name: pd.Series(column, dtype=object if kind in ("text", "json") or
                                          isinstance(column, list) else None)
                          for name, kind, column in zip(names, kinds, data)})
    frame.attrs["kinds"] = dict(zip(names, kinds))
    return frame


def devices() -> pd.DataFrame:
    """This machine's devices (``carb devices``): what each runs, and its energy meter."""
    return pd.DataFrame(_carb.devices())


def kernels(configurations: Keys, *, device: str = "cpu", passes: int = 20, warmup: int = 5,
            rounds: int = 1, seed: int = 1, drift_probe: Optional[str] = DEFAULT_DRIFT_PROBE,
            drift_every: float = 10.0) -> pd.DataFrame:
    """Where each configuration's forward pass spends its time, kernel by kernel (``carb
    kernels``; docs/cli.md): one row per kernel in execution order, its IR layers' kind, class,
    shapes, MACs and parameters, its median time, its share of the kernels' sum, the kernel
    model's features (docs/onnx.md, "Kernel model"), the whole pass's median, and the drift
    probe's latency at the configuration's moment (``probe_ms``; ``drift_probe=None`` or
    ``drift_every=0``: none), which :func:`fit` with ``kernels=`` and ``drift="on"`` divides
    by. ``rounds``: every configuration timed once a round, the rounds one after the other, and
    written with the medians of its rounds (``carb kernels --rounds``). A diagnostic in this
    process: nothing is stored."""
    keys = _keys_of(configurations)
    if keys is None:
        raise _input_error("kernels takes configuration keys", "configurations")
    if passes < 1 or warmup < 0:
        raise _input_error(f"passes {passes}, warmup {warmup}: at least one pass, no negative "
                           "warm-up", "passes")
    if rounds < 1:
        raise _input_error(f"rounds {rounds}: at least one round", "rounds")
    return _frame(_carb.kernels(keys, device, warmup, passes, rounds, seed, drift_probe,
                                drift_every))


def _protocol(**given: Any) -> Protocol:
    protocol = Protocol()
    for name, value in given.items():
        if value is not None:
            setattr(protocol, name, value)
    return protocol


def profile(db: PathLike, configurations: Any, *, device: str = "cpu",
            sample: Optional[int] = None, seed: int = 0, sampling: str = "random",
            name: Optional[str] = None, time_budget: Union[None, float, str] = None,
            shard: str = "0/1", rounds: int = 1,
            drift_probe: Optional[str] = DEFAULT_DRIFT_PROBE, drift_every: float = 10.0,
            min_time: Optional[float] = None, max_time: Optional[float] = None,
            min_samples: Optional[int] = None, target_ci: Optional[float] = None,
            energy_window: Optional[float] = None, cooldown: Optional[float] = None,
            timeout: Optional[float] = None, worker_reuse: Optional[int] = None,
            worker_memory_limit: Optional[int] = None, retry_limit: int = 3,
            idle_window: float = 2.0, progress: bool = True) -> Dict[str, Any]:
    """Measures configurations on a device into a database (``carb profile``;
    docs/measurement.md): resumable, each in a worker process, one transaction per measurement.

    ``configurations``: a :class:`Space` (every point, or a ``sample``) or keys. The protocol's
    options default to carb's (None). A progress bar shows in a terminal and in a notebook
    (tqdm). Ctrl-C (KeyboardInterrupt) stops the campaign: the measurement in flight is dropped,
    every finished one is in the database, and running it again resumes. Returns the summary."""
    if isinstance(configurations, Space):
        space = configurations
        indices = space.indices(sample, seed, sampling)
        keys, spec_text, campaign = None, space.text, name or space.name
    else:
        space, indices = None, None
        keys = _keys_of(configurations)
        if keys is None:
            raise _input_error("profile takes a Space or configuration keys")
        spec_text, campaign = "".join(key + "\n" for key in keys), name or "keys"
    if isinstance(time_budget, str):
        time_budget = _carb.parse_duration(time_budget)
    protocol = _protocol(min_time_s=min_time, max_time_s=max_time, min_samples=min_samples,
                         target_relative_ci=target_ci, energy_window_min_s=energy_window,
                         cooldown_s=cooldown, timeout_s=timeout, worker_reuse=worker_reuse,
                         worker_memory_limit_bytes=worker_memory_limit)
    bar = _Progress(progress, f"carb profile {campaign}")
    try:
        summary, raised = _carb.profile(
            _os.fspath(db), keys, None if space is None else space._handle, indices, campaign,
            spec_text, device, protocol, retry_limit, time_budget, shard, rounds, drift_probe,
            drift_every, idle_window, bar)
    finally:
        bar.close()
    summary["host"] = _json.loads(summary["host"])
    if raised is not None:
        measured = sum(summary["measured"].values())
        print(f"carb: profile stopped: the {measured} configurations measured now are in "
              f"{_os.fspath(db)}; run it again to resume", file=_sys.stderr)
        raise raised
    return summary


# --------------------------------------------------------------------------------------------
# Characterization and the report


def _databases(db: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(db, (str, _os.PathLike)):
        return [_os.fspath(db)]
    return [_os.fspath(path) for path in db]


def _model_arguments(model: Union[None, PathLike, Model]) -> Tuple[Any, str]:
    """A model given as a file or an object: the object (or None) and its name."""
    if model is None:
        return None, ""
    if isinstance(model, Model):
        return model._handle, model.path or "the model"
    return None, _os.fspath(model)


def characterize(db: Union[PathLike, Sequence[PathLike]], *,
                 model: Union[None, PathLike, Model] = None, devices: Sequence[str] = (),
                 fit: bool = True, seed: Optional[int] = None,
                 threads: int = 1) -> Dict[str, Any]:
    """How each target scales and transfers (``carb characterize --format json``;
    docs/characterization.md), as a dictionary."""
    handle, model_path = _model_arguments(model)
    text, notes = _carb.characterize(_databases(db), list(devices), handle, model_path, fit,
                                     _fit_options(seed=seed, threads=threads))
    for note in notes:
        _warnings.warn(note, stacklevel=2)
    return _json.loads(text)


def report(db: Union[PathLike, Sequence[PathLike]], output: PathLike, *,
           model: Union[None, PathLike, Model] = None,
           screening: Union[None, PathLike, pd.DataFrame] = None, devices: Sequence[str] = (),
           fit: bool = True, seed: Optional[int] = None, threads: int = 1) -> str:
    """Writes the HTML report (``carb report``; docs/report.md): one file that opens offline.
    ``screening``: a result file (``carb screen --json``) or :func:`screen`'s DataFrame.
    Returns the path written."""
    handle, model_path = _model_arguments(model)
    screening_path, screening_json = "", ""
    if isinstance(screening, pd.DataFrame):
        if "screening" not in screening.attrs:
            raise _input_error("screening: a DataFrame screen() returned, or a result file",
                               "screening")
        screening_json = screening.attrs["screening"]
    elif screening is not None:
        screening_path = _os.fspath(screening)
    generated = _datetime.datetime.now(_datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    _, _, notes = _carb.report(_databases(db), list(devices), handle, model_path, screening_path,
                               screening_json, fit, _fit_options(seed=seed, threads=threads),
                               generated, _os.fspath(output))
    for note in notes:
        _warnings.warn(note, stacklevel=2)
    return _os.fspath(output)
