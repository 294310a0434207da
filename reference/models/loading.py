"""Loading a model file the user named: a torch program, an XGBoost booster or a pickle.

A file that is not a model of its kind is refused with one line that says so,
and only that: the library's own complaint is trimmed to its first sentence
(no source paths, no timestamps), and what a library logs while it fails
is kept off the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .adapters import ModelError

LIBRARY_LOGGERS = ("torch", "torch.export", "torch._export", "xgboost")
"""Loggers that print a traceback or a notice of their own when a file does not load."""

_XGBOOST_PREFIX = re.compile(r"^\[[0-9:]+\]\s+\S+:\d+:\s*")
"""XGBoost's ``[06:34:24] /path/to/json.h:88: `` in front of its messages."""


@contextlib.contextmanager
def quiet_loggers() -> Iterator[None]:
    """No library's log record (torch prints a whole traceback) reaches the terminal.

    Python warnings are not silenced here: the CLI records them into the report
    (:func:`pytest_clinaudit.owner.audit.recorded_warnings`).
    """
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def first_line(exc: BaseException, limit: int = 160) -> str:
    """The first line of an exception's message, without XGBoost's location prefix."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return _XGBOOST_PREFIX.sub("", line)[:limit]


def load_model_file(path: Path) -> Any:
    """Load a model file the user named, by its suffix.

    ``.pt2``: through the torch adapter; ``.json`` / ``.ubj``: an ``xgboost.Booster``;
    anything else is unpickled. Only ever called on a path the user passed
    explicitly: unpickling runs code, so never on files found by searching.
    """
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    if suffix == ".pt2":
        try:
            import torch  # noqa: F401 - loading the program imports it anyway
        except ImportError:
            raise ModelError(
                f"{path}: .pt2 models need torch (pip install 'pytest-clinaudit[torch]')"
            ) from None
        from .torch_adapter import TorchClassifier

        try:
            with quiet_loggers():
                return TorchClassifier.from_file(path)
        except Exception as exc:  # noqa: BLE001 - any loading failure is the file's problem
            raise ModelError(
                f"{path}: not a torch exported program ({type(exc).__name__}: {first_line(exc)})"
            ) from None
    if suffix in {".json", ".ubj"}:
        import xgboost

        booster = xgboost.Booster()
        try:
            with quiet_loggers():
                booster.load_model(str(path))
        except xgboost.core.XGBoostError as exc:
            raise ModelError(f"{path}: not an XGBoost model ({first_line(exc)})") from None
        return booster
    import pickle

    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # noqa: S301 - a file the user named explicitly
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the file's problem
        raise ModelError(
            f"{path}: cannot be unpickled ({type(exc).__name__}: {first_line(exc)})"
        ) from None
