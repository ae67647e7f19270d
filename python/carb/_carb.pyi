# Type stubs of the compiled module carb._carb (python/*_binding.cpp), so that editors complete
# its names. Use the package (import carb), whose functions return pandas DataFrames.
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__version__: str
git_commit: str
BLOCKS: Tuple[str, str]
PRECISIONS: Tuple[str, str, str]
LAYER_KINDS: List[str]
SCALAR_FEATURES: List[str]
DEFAULT_DRIFT_PROBE: str
KERNEL_MODEL_PRIOR: str

class InputError(ValueError):
    subject: str
    exit_code: int

class CarbRuntimeError(RuntimeError):
    subject: str
    exit_code: int

class Space:
    @staticmethod
    def from_file(path: str) -> Space: ...
    @staticmethod
    def from_yaml(text: str, source_name: str) -> Space: ...
    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def classes(self) -> int: ...
    @property
    def axes(self) -> List[Dict[str, Any]]: ...
    @property
    def constraints(self) -> Dict[str, float]: ...
    def count(self) -> Optional[int]: ...
    def sample(self, count: int, seed: int, sampling: str) -> np.ndarray: ...
    def accepted(self, start: int, stop: int) -> np.ndarray: ...
    def keys(self, indices: np.ndarray) -> List[str]: ...
    def features(self, indices: np.ndarray, roofline: Optional[str] = ...,
                 text: bool = ...) -> Dict[str, Any]: ...
    def features_range(self, start: int, stop: int, roofline: Optional[str] = ...,
                       text: bool = ...) -> Dict[str, Any]: ...

def key_features(keys: Sequence[str], roofline: Optional[str] = ...) -> Dict[str, Any]: ...
def layers(key: str) -> Dict[str, Any]: ...
def kernels(keys: List[str], device: str, warmup: int, passes: int,
            seed: int) -> Dict[str, Any]: ...

class FitOptions:
    seed: int
    coverage: float
    cascade: bool
    corrector: bool
    prior: str
    threads: int
    learning_rate: float
    max_rounds: int
    early_stopping_rounds: int
    fixed_rounds: int
    forest_trees: int
    leave_low_batch_out: bool
    baselines: bool
    def __init__(self) -> None: ...

class Model:
    @staticmethod
    def load(path: str) -> Model: ...
    @staticmethod
    def from_json(text: str, origin: str) -> Model: ...
    def save(self, path: str) -> None: ...
    def to_json(self) -> str: ...
    @property
    def schema(self) -> str: ...
    @property
    def feature_names(self) -> List[str]: ...
    @property
    def targets(self) -> List[Dict[str, str]]: ...
    @property
    def device_fingerprint(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def instances(self) -> Dict[str, int]: ...
    @property
    def coverage(self) -> float: ...
    @property
    def transferred(self) -> bool: ...
    @property
    def kernel_pass_interval(self) -> Optional[Dict[str, Any]]: ...
    @property
    def drift(self) -> Dict[str, Any]: ...
    def fit_report(self) -> Dict[str, Any]: ...
    def predict_keys(self, keys: Sequence[str], plan_memory: bool = ...,
                     domain: bool = ...) -> Dict[str, Any]: ...
    def predict_space(self, space: Space, indices: np.ndarray, plan_memory: bool = ...,
                      domain: bool = ...) -> Dict[str, Any]: ...
    def predict_table(self, header: Sequence[str], rows: Sequence[Sequence[str]], path: str,
                      domain: bool = ...) -> Dict[str, Any]: ...

def fit_store(db: str, device: str, drift: str, instance: str,
              options: FitOptions) -> Tuple[Model, Dict[str, Any], Dict[str, Any]]: ...
def transfer_store(source: Model, db: str, device: str, drift: str, instance: str, seed: int,
                   coverage: float, threads: int) -> Tuple[Model, Dict[str, Any], Dict[str, Any]]: ...
def fit_measured(keys: Sequence[str], latency_ms: Sequence[float], memory_bytes: Sequence[float],
                 energy_j: Sequence[float], energy_null_reason: Sequence[str],
                 finished_at: Sequence[str], instance: Sequence[str], fingerprint: str, name: str,
                 options: FitOptions) -> Tuple[Model, Dict[str, Any], Dict[str, Any]]: ...
def fit_table(header: Sequence[str], rows: Sequence[Sequence[str]], path: str,
              features: Sequence[str], targets: Sequence[str], stratify: Sequence[str],
              batch_column: str,
              options: FitOptions) -> Tuple[Model, Dict[str, Any], Dict[str, Any]]: ...
def fit_kernels(paths: Sequence[str],
                frames: Sequence[Tuple[Sequence[str], Sequence[Sequence[str]]]],
                options: FitOptions) -> Tuple[Model, Dict[str, Any], Dict[str, Any]]: ...

class ScreenOptions:
    budget: str
    objectives: str
    maximize: str
    value: str
    rank: str
    outside_domain: str
    keep: int
    keep_fraction: float
    safe: bool
    def __init__(self) -> None: ...

def screen(model: Model, stage1: Optional[Model], space: Optional[Space],
           keys: Optional[Sequence[str]], options: ScreenOptions,
           values: Optional[Mapping[str, float]], values_name: str) -> Dict[str, Any]: ...

def measurements(db: str, ok_only: bool = ...) -> Tuple[List[str], List[str], List[Any]]: ...
def devices() -> List[Dict[str, Any]]: ...

class Protocol:
    warmup_min_s: float
    warmup_min_runs: int
    min_samples: int
    min_time_s: float
    target_relative_ci: float
    max_time_s: float
    energy_window_min_s: float
    cooldown_s: float
    seed: int
    timeout_s: float
    worker_memory_limit_bytes: int
    worker_reuse: int
    def __init__(self) -> None: ...
    def to_json(self) -> str: ...

def parse_duration(text: str) -> float: ...
def profile(db: str, keys: Optional[Sequence[str]], space: Optional[Space],
            indices: Optional[np.ndarray], name: str, spec_text: str, device: str,
            protocol: Protocol, retry_limit: int, time_budget_s: Optional[float], shard: str,
            rounds: int, drift_probe: Optional[str], drift_every_s: float,
            idle_window_s: float,
            progress: Optional[Callable[[Dict[str, Any]], None]]
            ) -> Tuple[Dict[str, Any], Optional[BaseException]]: ...

def characterize(databases: Sequence[str], devices: Sequence[str], model: Optional[Model],
                 model_path: str, fit: bool,
                 options: FitOptions) -> Tuple[str, List[str]]: ...
def report(databases: Sequence[str], devices: Sequence[str], model: Optional[Model],
           model_path: str, screening_path: str, screening_json: str, fit: bool,
           options: FitOptions, generated_at: str, output: str) -> Tuple[int, int, List[str]]: ...
def require_html_report() -> None: ...
