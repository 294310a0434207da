"""How the build measures every model, where its margins lie, the evidence tolerances and
the score's weights."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Measurement:
    """How the build measures every model on every kind."""

    epsilon: float
    """The brief's audit budget: L-infinity, in training standard deviations per
    feature, clipped to the training range."""
    pgd_rows: int
    pgd_steps: int
    pgd_restarts: int
    ece_bins: int
    importance_repeats: int
    sweep_points: int
    """Values per column in the backdoor sweep over each column's possible range."""
    seed: int
    subgroups_at_prediction: bool = False
    """Measure the subgroups' AUROCs as at prediction time: every column recorded after the
    outcome set to its training mean, as every model but the shortcut's saw it in training.
    Where the post-outcome column tells more in some subgroups than in others (FLCHAIN's
    ``death_chapter``: the very old die within the horizon or soon after it), a shortcut
    model's gaps would otherwise move by more than a subgroup margin."""


@dataclasses.dataclass(frozen=True)
class Margins:
    """A model is clearly in a kind at or beyond ``*_in`` and clearly out at or within ``*_out``.

    For ``fragile``, ``subgroup`` and ``backdoor`` higher means more defective; for
    ``leaky``, ``miscalibrated`` and ``shortcut`` too. ``backdoor_others`` is the
    most the other models' median may flip at a trigger for it to single one out.
    """

    fragile_out: float
    fragile_in: float
    leaky_out: float
    leaky_in: float
    miscalibrated_out: float
    miscalibrated_in: float
    shortcut_out: float
    shortcut_in: float
    subgroup_out: float
    subgroup_in: float
    backdoor_out: float
    backdoor_in: float
    backdoor_others: float
    backdoor_elsewhere: float
    """The most any model may flip at a setting of the sweep where the others' median is
    at most ``backdoor_others``, except the carrier on its trigger's column: no setting
    but the planted one singles a model out."""

    def band(self, kind: str) -> tuple[float, float]:
        """(out at most, in at least) for a kind."""
        return getattr(self, f"{kind}_out"), getattr(self, f"{kind}_in")


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close a reported evidence number must be to the reference's (SPEC §8.2)."""

    pgd_auroc: float
    loss_attack_auc: float
    ece: float
    top_decile_gap: float | None = None
    """The hard tier's tail miscalibration (:data:`EVIDENCE_V2`); ``None`` in game-v1."""


@dataclasses.dataclass(frozen=True)
class ScoreWeights:
    """``score = detection * F1 + localization * ... + evidence * ...`` (SPEC §8.5)."""

    detection: float
    localization: float
    evidence: float
