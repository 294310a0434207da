"""The top of the risk range (``miscalibrated``): each model's top-decile gap, the mean
predicted risk less the observed death rate among the patients it rates highest."""

from __future__ import annotations

from .workspace import Workspace

# The brief's words, used when the facts block does not state them.
TOP_SHARE = 0.1
"""``top_decile_gap`` is measured on this share of the test patients, the highest rated."""


def top_decile(ws: Workspace) -> dict[str, dict[str, float]]:
    """Per model: among the tenth of the test patients it rates highest, the mean predicted
    risk less the observed death rate, and that rate's standard error."""
    import numpy as np

    out = {}
    share = float(ws.facts.get("top_share", TOP_SHARE))
    for name, z in ws.z.items():
        count = max(1, int(round(share * len(z))))
        top = np.argsort(-z, kind="stable")[:count]
        p = 1.0 / (1.0 + np.exp(-z[top]))
        rate = float(ws.y_test[top].mean())
        out[name] = {
            "gap": float(p.mean() - rate),
            "se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / count)),
        }
    return out
