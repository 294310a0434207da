"""An audit report as strict JSON: every undefined number is ``null``, with a reason.

On a perfectly separating test set the logistic recalibration has no maximum
and its slope came back NaN; the JSON writer (rightly, ``allow_nan=False``)
refused it, and the audit ended in a traceback with no report (issue 18).
Statistics that the rows cannot define are normal on real data: a test set
with one class in its FGSM sample, a model that predicts one class everywhere,
a bootstrap whose every replicate lacks a class. :func:`json_ready` makes the
report valid JSON whatever happened:

- every NaN or infinite float becomes ``None``;
- ``undefined`` maps the dotted path of each such value (``a.b[].c`` for
  list items) to a one-line reason: the one its producer registered for that
  path or the nearest enclosing one, else a generic one;
- NumPy scalars become Python numbers and tuples lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

GENERIC = "not defined on these rows"

INTERVAL_REASON = "no bootstrap replicate defines it (each lacks the rows it needs)"
"""The reason for an interval's undefined ends when its producer gave none."""


def _reason(path: str, reasons: Mapping[str, str]) -> tuple[str, str]:
    """(path to report, reason): the nearest registered enclosing path, else ``path``."""
    probe = path
    while True:
        if probe in reasons:
            return probe, reasons[probe]
        cut = max(probe.rfind("."), probe.rfind("["))
        if cut <= 0:
            break
        probe = probe[:cut]
    if path.startswith("uncertainty."):
        parent = path.rsplit(".", 1)[0]
        return parent, INTERVAL_REASON
    return path, GENERIC


def json_ready(report: Mapping[str, Any], reasons: Mapping[str, str]) -> dict[str, Any]:
    """``report`` with every undefined number ``None`` and an ``undefined`` map of reasons.

    A path registered in ``reasons`` whose value is already ``None`` is listed too.
    """
    undefined: dict[str, str] = {}

    def clean(value: Any, path: str) -> Any:
        item = getattr(value, "item", None)
        if (
            callable(item)
            and not isinstance(value, (str, bytes))
            and getattr(value, "ndim", 1) == 0
        ):
            value = item()
        if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
            if value is None and path in reasons:
                undefined[path] = reasons[path]
            return value
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            where, why = _reason(path, reasons)
            undefined[where] = why
            return None
        if isinstance(value, Mapping):
            return {str(k): clean(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{path}[]") for v in value]
        tolist = getattr(value, "tolist", None)
        if callable(tolist):
            return clean(tolist(), path)
        return str(value)

    cleaned: dict[str, Any] = clean(dict(report), "")
    for path, why in reasons.items():
        if _lookup(cleaned, path) is None and path not in undefined:
            undefined[path] = why
    cleaned["undefined"] = dict(sorted(undefined.items()))
    return cleaned


_MISSING = object()


def _lookup(report: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, None if it is None, ``_MISSING`` if there is none."""
    value: Any = report
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value
