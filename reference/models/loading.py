"""Loading a model file the user named: a torch program, an XGBoost booster or a pickle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .adapters import ModelError


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
            return TorchClassifier.from_file(path)
        except Exception as exc:  # noqa: BLE001 - any loading failure is the file's problem
            raise ModelError(
                f"{path}: not a torch exported program ({type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''})"
            ) from None
    if suffix in {".json", ".ubj"}:
        import xgboost

        booster = xgboost.Booster()
        try:
            booster.load_model(str(path))
        except xgboost.core.XGBoostError as exc:
            raise ModelError(f"{path}: not an XGBoost model ({str(exc).splitlines()[0]})") from None
        return booster
    import pickle

    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # noqa: S301 - a file the user named explicitly
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the file's problem
        raise ModelError(f"{path}: cannot be unpickled ({type(exc).__name__}: {exc})") from None
