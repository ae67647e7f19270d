"""A campaign's progress: a tqdm bar where tqdm is installed (in a notebook, its widget where
ipywidgets is), else carb's own progress line on stderr, rewritten in place on a terminal."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional

try:
    from tqdm.auto import tqdm as _tqdm
except ImportError:  # pragma: no cover - tqdm is one of carb's Debian dependencies
    _tqdm = None


class Progress:
    """Receives carb's progress dictionaries (total, finished, by_status, last_key, text)."""

    def __init__(self, enabled: bool, description: str) -> None:
        self._enabled = enabled
        self._description = description
        self._bar: Optional[Any] = None
        self._terminal = sys.stderr.isatty()
        self._line_open = False

    def __call__(self, state: Dict[str, Any]) -> None:
        if not self._enabled:
            return
        if _tqdm is not None:
            if self._bar is None:
                self._bar = _tqdm(total=state["total"], desc=self._description, unit="config")
            self._bar.n = state["finished"]
            statuses = ", ".join(f"{s} {n}" for s, n in sorted(state["by_status"].items()))
            self._bar.set_postfix_str(statuses, refresh=False)
            self._bar.refresh()
            return
        if self._terminal:
            sys.stderr.write("\r\033[K" + state["text"])
            sys.stderr.flush()
            self._line_open = True
        elif state["finished"] % 50 == 0 or state["finished"] == state["total"]:
            sys.stderr.write(state["text"] + "\n")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._line_open:
            sys.stderr.write("\n")
            self._line_open = False
