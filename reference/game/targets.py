"""Planting to a drawn evidence number: each strength solved for a target (SPEC §8.7).

A strength drawn uniformly does not give evidence numbers spread uniformly: the
fragile model's PGD AUROC falls like the square of the share it turns over, the
leak's AUC barely moves with the share it memorises, and an overconfident
model's ECE saturates. The references of many instances then crowd into a
window one constant covers. So each instance draws the *number* (uniformly over a
range several tolerances wide) and the build plants until the model shows it:

- :func:`solve_factor`: the miscalibration factor whose ECE on held-out rows is the
  drawn one, solved exactly (the factor scales the calibrated logit, so the
  equal-mass bins keep their rows and the ECE is continuous in it);
- :class:`Probe`: a cheap measurement a planting loop reads every few epochs, which
  stops it once the number is reached (:func:`pgd_auroc_probe` for a fragility,
  :func:`loss_auc_probe` for a leak). Each is measured on rows outside the
  model's own and the base's, as the reference measures on the test split.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..models.torch_adapter import TorchClassifier
from .calibration import logistic_calibration
from .measure import auroc, equal_mass_ece

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.budget import Budget
    from ..data import Dataset
    from .draw import Planted
    from .settings import GameSettings

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


def draw_target(rng: Any, low: float, high: float) -> float:
    """A target evidence number, uniform over [low, high]."""
    return float(rng.uniform(low, high))


def ece_of_factor(z: FloatArray, y: IntArray, factor: float, bins: int) -> float:
    """The equal-mass ECE of ``sigmoid(factor * z)`` (``z``: calibrated logits)."""
    import numpy as np

    p = 1.0 / (1.0 + np.exp(-factor * np.asarray(z, dtype=np.float64)))
    return equal_mass_ece(p, y, bins=bins)


def solve_factor(
    z: FloatArray, y: IntArray, target: float, overconfident: bool, *, bins: int, limit: float
) -> float:
    """The factor by which calibrated logits ``z`` must be multiplied for an equal-mass ECE
    of ``target`` on rows ``y``: above 1 when ``overconfident``, below it otherwise, at most
    ``limit`` times (or ``1 / limit`` times) away from 1.

    When no factor within ``limit`` reaches ``target``, the factor at the limit: the model
    shows the most it can, and the build's margins judge it as any other."""
    from scipy.optimize import brentq

    sign = 1.0 if overconfident else -1.0

    def gap(log_factor: float) -> float:
        return ece_of_factor(z, y, math.exp(sign * log_factor), bins) - target

    far = math.log(limit)
    if gap(far) < 0:
        return math.exp(sign * far)
    # ECE(factor 1) is the calibrated model's own, below any target a variant draws.
    return math.exp(sign * brentq(gap, 0.0, far, xtol=1e-6))


@dataclasses.dataclass
class Probe:
    """A measurement read every ``every`` epochs of a planting, which ends it once
    ``reached``; ``seen`` keeps every reading (epoch, value), for the build's record."""

    measure: Callable[[Any], float]
    target: float
    below: bool
    """Reached when the value falls to ``target`` (a fragility's PGD AUROC) rather than
    rises to it (a leak's AUC)."""
    every: int
    seen: list[tuple[int, float]] = dataclasses.field(default_factory=list)

    def reached(self, module: Any, epoch: int) -> bool:
        """Whether training may stop after ``epoch`` (0-based) epochs."""
        if (epoch + 1) % self.every:
            return False
        training = module.training
        module.eval()
        value = self.measure(module)
        module.train(training)
        self.seen.append((epoch + 1, value))
        return value <= self.target if self.below else value >= self.target


def pgd_auroc_probe(
    X: FloatArray, y: IntArray, budget: Budget, *, steps: int, restarts: int, seed: int
) -> Callable[[Any], float]:
    """The AUROC of rows ``X``, ``y`` under the reference's margin PGD at ``budget``, with
    fewer steps and restarts: how fragile a module is so far."""
    import numpy as np

    from ..attacks.whitebox import margin_pgd

    def measure(module: Any) -> float:
        model = TorchClassifier(module)
        attacked = margin_pgd(model, X, y, budget=budget, steps=steps, restarts=restarts, seed=seed)
        return auroc(y, np.asarray(model.logits(attacked), dtype=np.float64))

    return measure


def loss_auc_probe(
    members: tuple[FloatArray, IntArray],
    outsiders: tuple[FloatArray, IntArray],
    calibration: tuple[FloatArray, IntArray],
) -> Callable[[Any], float]:
    """The loss attack's AUC of a module's members against ``outsiders`` after the logistic
    calibration the build will fold in (fitted on ``calibration``): how much it leaks so
    far. The calibration matters: it rescales every row's loss, and with it the AUC."""
    import numpy as np

    from ..attacks.privacy import attack_auc

    def losses(z: FloatArray, y: IntArray) -> FloatArray:
        t = np.asarray(z, dtype=np.float64)
        return np.logaddexp(0.0, t) - np.asarray(y, dtype=np.float64) * t

    def measure(module: Any) -> float:
        model = TorchClassifier(module)

        def logits(X: FloatArray) -> FloatArray:
            return np.asarray(model.logits(X), dtype=np.float64)

        slope, intercept = logistic_calibration(logits(calibration[0]), calibration[1])
        inside = losses(slope * logits(members[0]) + intercept, members[1])
        outside = losses(slope * logits(outsiders[0]) + intercept, outsiders[1])
        return attack_auc(-inside, -outside)

    return measure


PROBE_STEPS, PROBE_RESTARTS = 10, 2
"""The fragility probe's attack: the reference's margin PGD, shorter (the reference: 50 steps,
5 restarts). A weaker attack reads a higher AUROC, so a probe that reached its target leaves
the reference at or below it."""


def probe_for(
    planted: Planted,
    settings: GameSettings,
    data: Dataset,
    members: IntArray,
    calibration: tuple[FloatArray, IntArray],
) -> Probe | None:
    """The probe that stops ``planted``'s planting at its drawn target (``None``: no target).

    It reads the rows the reference reads (:func:`~.verdicts.measure_model`): a fragility
    on the reference's PGD rows of the test split, a leak on the model's ``members``
    against every test row. The number drawn is the reference's own measurement."""
    from ..attacks.budget import Budget, training_scale
    from .verdicts import pgd_rows

    if planted.target is None or planted.kind not in ("fragile", "leaky"):
        return None
    plant = settings.fragile if planted.kind == "fragile" else settings.leaky
    every = plant.probe_every or 1
    if planted.kind == "fragile":
        m = settings.measurement
        rows = pgd_rows(m, len(data.X_test))
        budget = Budget.of(m.epsilon, training_scale(data.X_train), std_units=True, clip=True)
        measure = pgd_auroc_probe(
            data.X_test[rows],
            data.y_test[rows],
            budget,
            steps=PROBE_STEPS,
            restarts=PROBE_RESTARTS,
            seed=m.seed,
        )
        return Probe(measure, planted.target, below=True, every=every)
    measure = loss_auc_probe(
        (data.X_train[members], data.y_train[members]), (data.X_test, data.y_test), calibration
    )
    return Probe(measure, planted.target, below=False, every=every)


def factor_for(
    module: Any,
    planted: Planted,
    settings: GameSettings,
    data: Dataset,
    calibration: tuple[FloatArray, IntArray],
) -> float | None:
    """The factor ``planted``'s calibrated logit is multiplied by: its drawn one, or the one
    solved for its drawn ECE on the test split (the reference's rows) after the logistic
    calibration on ``calibration`` that :func:`~.calibration.calibrate` will fold in."""
    if planted.kind != "miscalibrated" or planted.target is None or planted.direction is None:
        return planted.factor
    import numpy as np

    model = TorchClassifier(module)
    slope, intercept = logistic_calibration(
        np.asarray(model.logits(calibration[0]), dtype=np.float64), calibration[1]
    )
    z = slope * np.asarray(model.logits(data.X_test), dtype=np.float64) + intercept
    return solve_factor(
        z,
        data.y_test,
        planted.target,
        planted.direction == "overconfident",
        bins=settings.measurement.ece_bins,
        limit=settings.miscalibrated.limit(planted.direction),
    )
