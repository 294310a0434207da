"""The hard tier's fragile regions (SPEC §9): each test patient's risk under the audit's attack.

A fragile model of the hard tier turns over the risks of one region's patients under the
brief's attack and of no one else. The build and the grader measure it the same way:
every model is attacked on the test patients the groups are measured on (the strong
attack of SPEC §7.3, :func:`~...attacks.whitebox.margin_pgd`, at the brief's budget:
``epsilon`` training standard deviations a side, clipped to the training range), and a
group's *drop* is its AUROC less its AUROC under attack
(:func:`~.ranking.group_drops`). A model's *excess drop* on a group is its own less the
zoo's median there, as a hidden group's excess gap is.

The budget is read from the networks' own buffers (every model of a zoo has the public
training split's standard deviations and range), so the grader, which holds the
models' numbers and not the training split, attacks with the build's budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...attacks.budget import Budget
from ...attacks.whitebox import Attackable, margin_pgd

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..settings import GameSettings

    FloatArray = npt.NDArray[np.float64]


def audit_budget(epsilon: float, std: Any, low: Any, high: Any) -> Budget:
    """``epsilon`` training standard deviations ``std`` a side, clipped to [``low``,
    ``high``], each (d,), read as float32 as a network's buffers hold them."""
    import numpy as np

    def read(values: Any) -> FloatArray:
        as_float: FloatArray = np.asarray(values, dtype=np.float32).astype(np.float64)
        return as_float

    return Budget(epsilon * read(std), read(low), read(high))


def attacked_logits(
    model: Attackable, X: Any, y: Any, budget: Budget, settings: GameSettings
) -> FloatArray:
    """Each row's logit (n,) at the point the attack chose for it: a death pushed down, a
    survivor up (``measurement.pgd_steps`` steps, ``pgd_restarts`` restarts, from
    ``measurement.seed``)."""
    import numpy as np

    m = settings.measurement
    moved = margin_pgd(
        model, X, y, budget=budget, steps=m.pgd_steps, restarts=m.pgd_restarts, seed=m.seed
    )
    logits: FloatArray = np.asarray(model.logits(moved), dtype=np.float64)
    return logits
