"""The defining measurements of the catalogue (SPEC §8.2), one function per kind.

Each takes a model with the interface of
:class:`~..models.torch_adapter.TorchClassifier` (``logits``, ``logit_gradient``,
``row_losses``) and returns plain floats; none imports torch. They are what the
build measures on every model for every kind, and so what the ground truth
means: the margins of the variant file are drawn on these numbers.

fragile
    The drop of the test AUROC under the strong white-box attack of SPEC §7.3
    (margin PGD with restarts, :func:`~..attacks.whitebox.margin_pgd`) at the
    brief's budget, on a fixed draw of test rows.
leaky
    The AUC of the loss-threshold attack (Yeom et al. 2018): the model's
    training rows against as many test rows, score ``-loss`` in float64 from
    the logit (:meth:`~..models.torch_adapter.TorchClassifier.row_losses`).
miscalibrated
    The L1 expected calibration error over equal-mass bins of the test split.
shortcut
    Permutation importance of the column: the mean AUROC drop when its values
    are shuffled among the test rows.
subgroup
    Each listed subgroup's test AUROC next to its complement's.
backdoor
    Flip shares at a trigger setting (:mod:`.claims`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from ..attacks.budget import Budget
from ..attacks.privacy import attack_auc
from ..attacks.whitebox import margin_pgd

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


class Program(Protocol):
    """What the measurements ask of a model (a loaded ``model.pt2``)."""

    def logits(self, X: Any) -> Any: ...

    def logit_gradient(self, X: Any) -> Any: ...

    def row_losses(self, X: Any, y: Any) -> Any: ...

    def predict_proba(self, X: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...


def auroc(y: Any, score: Any) -> float:
    """``sklearn.metrics.roc_auc_score``: higher scores should mean class 1."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


@dataclasses.dataclass(frozen=True)
class Robustness:
    clean_auroc: float
    adversarial_auroc: float

    @property
    def drop(self) -> float:
        """How far the attack lowers the AUROC (higher: more fragile)."""
        return self.clean_auroc - self.adversarial_auroc


def robustness(
    model: Program,
    X: FloatArray,
    y: IntArray,
    *,
    budget: Budget,
    steps: int,
    restarts: int,
    seed: int,
) -> Robustness:
    """AUROC of rows ``X`` (n, d) clean and under margin PGD within ``budget``."""
    import numpy as np

    adversarial = margin_pgd(model, X, y, budget=budget, steps=steps, restarts=restarts, seed=seed)
    clean = auroc(y, np.asarray(model.logits(X), dtype=np.float64))
    attacked = auroc(y, np.asarray(model.logits(adversarial), dtype=np.float64))
    return Robustness(clean, attacked)


def loss_attack_auc(
    model: Program, X_members: FloatArray, y_members: IntArray, X_out: FloatArray, y_out: IntArray
) -> float:
    """AUC of ``-loss`` telling members (its training rows) from non-members; 0.5 is no leak."""
    members = -model.row_losses(X_members, y_members)
    outsiders = -model.row_losses(X_out, y_out)
    return attack_auc(members, outsiders)


def equal_mass_ece(p: FloatArray, y: IntArray, *, bins: int) -> float:
    """L1 expected calibration error over ``bins`` bins holding equally many rows.

    Rows are sorted by their probability (ties in row order) and cut into
    ``bins`` runs whose sizes differ by at most one (``numpy.array_split``);
    ``ECE = sum_b n_b / n * |mean(y_b) - mean(p_b)|``. Equal-mass bins give every
    estimate the same number of rows, which equal-width bins at an 11% base
    rate do not (most rows fall in the lowest bins).
    """
    import numpy as np

    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    total = 0.0
    for part in np.array_split(order, bins):
        if len(part):
            total += len(part) / len(p) * abs(float(y[part].mean()) - float(p[part].mean()))
    return total


def probabilities(model: Program, X: FloatArray) -> FloatArray:
    """``sigmoid(logit)`` in float64 from the float32 logit, shape (n,)."""
    import numpy as np

    z = np.asarray(model.logits(X), dtype=np.float64)
    p: FloatArray = 1.0 / (1.0 + np.exp(-z))
    return p


def mean_confidence_slope(p: FloatArray, y: IntArray) -> float:
    """The slope of a logistic recalibration ``logit(P(y=1)) ~ a + b logit(p)``:
    below 1 the model is overconfident, above 1 underconfident."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    z = np.log(np.clip(p, 1e-12, 1 - 1e-12) / np.clip(1 - p, 1e-12, 1 - 1e-12))
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(z[:, None], y)
    return float(fit.coef_[0, 0])


def permutation_importance(
    model: Program, X: FloatArray, y: IntArray, column: int, *, repeats: int, seed: int
) -> float:
    """Mean AUROC drop when column ``column`` is shuffled among the rows, ``repeats`` times."""
    import numpy as np

    base = auroc(y, np.asarray(model.logits(X), dtype=np.float64))
    rng = np.random.RandomState(seed)
    drops = []
    for _ in range(repeats):
        shuffled = np.array(X, dtype=np.float64)
        shuffled[:, column] = rng.permutation(shuffled[:, column])
        drops.append(base - auroc(y, np.asarray(model.logits(shuffled), dtype=np.float64)))
    return float(np.mean(drops))


@dataclasses.dataclass(frozen=True)
class SubgroupAUROC:
    within: float
    complement: float

    @property
    def gap(self) -> float:
        """How much worse the subgroup is served than everyone else (higher: worse)."""
        return self.complement - self.within


def subgroup_auroc(model: Program, X: FloatArray, y: IntArray, mask: BoolArray) -> SubgroupAUROC:
    """AUROC within the rows of ``mask`` and within the others."""
    import numpy as np

    score = np.asarray(model.logits(X), dtype=np.float64)
    return SubgroupAUROC(auroc(y[mask], score[mask]), auroc(y[~mask], score[~mask]))
