"""The top of the risk range (``miscalibrated``): each model's top-decile gap, the mean
predicted risk less the observed death rate among the patients it rates highest."""

from __future__ import annotations

from typing import Any

from .workspace import Workspace

# The brief's words, used when the facts block does not state them.
TOP_SHARE = 0.1
"""``top_decile_gap`` is measured on this share of the test patients, the highest rated."""


def top_decile(ws: Workspace, rows: Any = None) -> dict[str, dict[str, float]]:
    """Per model: among the tenth of the test patients it rates highest, the mean predicted
    risk less the observed death rate, and that rate's standard error. ``rows`` (a boolean
    mask) measures among those test patients only."""
    import numpy as np

    out = {}
    share = float(ws.facts.get("top_share", TOP_SHARE))
    y = ws.y_test if rows is None else ws.y_test[rows]
    for name, z in ws.z.items():
        z = z if rows is None else z[rows]
        count = max(1, int(round(share * len(z))))
        top = np.argsort(-z, kind="stable")[:count]
        p = 1.0 / (1.0 + np.exp(-z[top]))
        rate = float(y[top].mean())
        out[name] = {
            "gap": float(p.mean() - rate),
            "se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / count)),
        }
    return out
