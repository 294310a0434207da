"""Torch MLP recipes of SPEC §7: architecture, optimiser and the defence tables.

A recipe (:class:`MLPRecipe`) says how to train a small multilayer perceptron,
optionally with PGD adversarial training (:class:`AdversarialTraining`, Madry
et al. 2018) or DP-SGD (:class:`DifferentialPrivacy`, Abadi et al. 2016, with
Opacus). Training is :mod:`.training`; the ``model.pt2`` artifact is
:mod:`.program`. Records only: importing this module needs no torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .recipes import RecipeError

Activation = Literal["relu", "tanh"]


Optimizer = Literal["adam", "sgd"]


Accountant = Literal["prv", "rdp"]


def _require(where: str, **checks: tuple[bool, Any, str]) -> None:
    """Raise a :class:`RecipeError` naming the first setting whose check failed."""
    for key, (ok, value, requirement) in checks.items():
        if not ok:
            raise RecipeError(f"{where}: {key} must be {requirement}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class AdversarialTraining:
    """PGD adversarial training (Madry et al. 2018): train on the worst case in a box.

    Every minibatch is replaced by its PGD adversarial copy: a uniform random
    start in the box ``|x' - x| <= epsilon * s`` (``s`` the training standard
    deviation per feature), then ``steps`` signed-gradient ascent steps of
    ``step_size * s`` on the loss, each projected back onto the box and onto
    the training range.
    """

    epsilon: float
    """Box half-width, in training standard deviations."""
    steps: int
    step_size: float
    """Ascent step, in training standard deviations."""
    random_start: bool

    def __post_init__(self) -> None:
        _require(
            "mlp adversarial_training",
            epsilon=(self.epsilon > 0, self.epsilon, "positive"),
            steps=(self.steps > 0, self.steps, "positive"),
            step_size=(self.step_size > 0, self.step_size, "positive"),
        )


@dataclasses.dataclass(frozen=True)
class DifferentialPrivacy:
    """DP-SGD with Opacus: per-example clipping and Gaussian noise, Poisson batches.

    The achieved epsilon at ``delta`` is computed by Opacus' accountant after
    training and recorded with the artifact (:class:`TrainingRecord`).
    """

    noise_multiplier: float
    """Noise standard deviation over the clipping norm."""
    max_grad_norm: float
    """Each example's gradient is clipped to this L2 norm."""
    delta: float
    accountant: Accountant
    """``"prv"`` (Opacus' default, tighter) or ``"rdp"``."""

    def __post_init__(self) -> None:
        _require(
            "mlp differential_privacy",
            noise_multiplier=(self.noise_multiplier > 0, self.noise_multiplier, "positive"),
            max_grad_norm=(self.max_grad_norm > 0, self.max_grad_norm, "positive"),
            delta=(0 < self.delta < 1, self.delta, "in (0, 1)"),
        )


@dataclasses.dataclass(frozen=True)
class MLPRecipe:
    """A multilayer perceptron with standardisation inside, and how to train it.

    The model maps raw features, in CSV column order, to the class-1 logit:
    ``z = (x - mean) / std`` with the training rows' mean and population
    standard deviation (ddof=0) stored as buffers, then ``hidden`` fully
    connected layers with ``activation``, then one output unit.
    """

    estimator: Literal["mlp"]
    hidden: tuple[int, ...]
    """Widths of the hidden layers, e.g. ``(64, 64)``."""
    activation: Activation
    optimizer: Optimizer
    lr: float
    weight_decay: float
    class_weight: Literal["balanced", "none"]
    """``"balanced"`` weights the positive rows' loss by ``n_negative / n_positive``
    (the ratio scikit-learn's ``class_weight="balanced"`` gives)."""
    epochs: int
    batch_size: int
    seed: int
    """Seeds initialisation, batch order, PGD starts and DP noise."""
    train_subset: int | None = None
    """Train on the *first* rows only (to overfit deliberately). The first rows
    are also the members the membership attacks query (§3.2 step 4), so every
    queried member is a row the model was trained on."""
    adversarial_training: AdversarialTraining | None = None
    differential_privacy: DifferentialPrivacy | None = None

    def __post_init__(self) -> None:
        _require(
            "mlp",
            hidden=(
                bool(self.hidden) and all(w > 0 for w in self.hidden),
                self.hidden,
                "a non-empty array of positive widths",
            ),
            lr=(self.lr > 0, self.lr, "positive"),
            weight_decay=(self.weight_decay >= 0, self.weight_decay, "non-negative"),
            epochs=(self.epochs > 0, self.epochs, "positive"),
            batch_size=(self.batch_size > 0, self.batch_size, "positive"),
            train_subset=(
                self.train_subset is None or self.train_subset > 0,
                self.train_subset,
                "positive",
            ),
        )
        if self.adversarial_training and self.differential_privacy:
            raise RecipeError("mlp: choose adversarial_training or differential_privacy, not both")
        if self.differential_privacy and self.optimizer != "sgd":
            # DP-SGD's accounting holds for any optimizer, but the recipe says
            # what the literature calls DP-SGD; keep the name honest.
            raise RecipeError("mlp: differential_privacy needs optimizer = 'sgd' (DP-SGD)")

    @property
    def augmentation(self) -> None:
        """Never FGSM-augmented (that is the scikit-learn recipes' defence); for callers
        that handle both kinds of recipe."""
        return None

    def describe(self) -> str:
        """A one-line summary, e.g. ``mlp 64-64 relu, adam, PGD-trained (eps=0.5 std)``."""
        text = f"mlp {'-'.join(map(str, self.hidden))} {self.activation}, {self.optimizer}"
        if self.train_subset is not None:
            text += f", first {self.train_subset} training rows"
        if self.adversarial_training:
            at = self.adversarial_training
            text += f", PGD-trained (eps={at.epsilon:g} std, {at.steps} steps)"
        if self.differential_privacy:
            dp = self.differential_privacy
            text += f", DP-SGD (sigma={dp.noise_multiplier:g}, C={dp.max_grad_norm:g})"
        return text


@dataclasses.dataclass(frozen=True)
class TrainingRecord:
    """What training did, for the reference and the manifest.

    ``epsilon`` is the (epsilon, delta)-DP guarantee Opacus' accountant gives
    for the steps actually taken; ``None`` without DP.
    """

    n_rows: int
    steps: int
    final_loss: float
    """Mean training loss of the last epoch (clean rows, or PGD rows if adversarial)."""
    epsilon: float | None
    delta: float | None
    accountant: str | None
    torch_version: str
    opacus_version: str | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
