"""Torch MLP recipes of SPEC §7: architecture, optimiser and the defence tables.

A recipe (:class:`MLPRecipe`) says how to train a small multilayer perceptron,
optionally with one defence: PGD adversarial training (:class:`AdversarialTraining`,
Madry et al. 2018), DP-SGD (:class:`DifferentialPrivacy`, Abadi et al. 2016, with
Opacus) or its ablation without noise (:class:`GradientClipping`). A variant
family shares one base recipe and differs only in that table (SPEC §7.4).
Training is :mod:`.training`; the ``model.pt2`` artifact is :mod:`.program`.
Records only: importing this module needs no torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .recipes import RecipeError

Activation = Literal["relu", "tanh"]


Optimizer = Literal["adam", "sgd"]


Accountant = Literal["prv", "rdp"]


ClassWeight = Literal["balanced", "none", "prevalence"]


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

    The recipe's optimizer takes the noisy clipped gradient (SGD: DP-SGD, Abadi
    et al. 2016; Adam: DP-Adam); the optimizer is post-processing, so the
    accounting is the same. The achieved epsilon at ``delta`` is computed by
    Opacus' accountant after training and recorded with the artifact
    (:class:`TrainingRecord`).
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
class GradientClipping:
    """The DP-SGD ablation: Opacus' per-example clipping and Poisson batches, no noise.

    Trained by the same code path as :class:`DifferentialPrivacy` with a noise
    multiplier of 0, so that a family's ``-clip`` and ``-dp`` models differ in
    the noise alone (the noise is what epsilon describes). No privacy guarantee.
    """

    max_grad_norm: float

    def __post_init__(self) -> None:
        _require(
            "mlp gradient_clipping",
            max_grad_norm=(self.max_grad_norm > 0, self.max_grad_norm, "positive"),
        )


@dataclasses.dataclass(frozen=True)
class Standardisation:
    """Public constants the program standardises with: ``z = (x - center) / scale``.

    Not statistics of the training rows: a DP model's artifact may carry
    nothing of its private rows outside the accountant (SPEC §7.4), so the
    constants come from the data's published documentation.
    """

    center: tuple[float, ...]
    scale: tuple[float, ...]
    source: str
    """Where the constants are published, for the manifest and a reader."""

    def __post_init__(self) -> None:
        _require(
            "mlp standardisation",
            scale=(
                len(self.scale) == len(self.center) and all(s > 0 for s in self.scale),
                self.scale,
                f"{len(self.center)} positive numbers (one per center)",
            ),
            source=(bool(self.source.strip()), self.source, "a non-empty description"),
        )


DEFENCES = ("adversarial_training", "differential_privacy", "gradient_clipping")
"""The defence tables of an :class:`MLPRecipe`; a recipe has at most one."""


@dataclasses.dataclass(frozen=True)
class MLPRecipe:
    """A multilayer perceptron with standardisation inside, and how to train it.

    The model maps raw features, in CSV column order, to the class-1 logit:
    ``z = (x - mean) / std``, the two stored as buffers, then ``hidden`` fully
    connected layers with ``activation``, then one output unit. ``mean`` and
    ``std`` are the public constants of ``standardisation`` when given, else
    the training rows' mean and population standard deviation (ddof=0).
    """

    estimator: Literal["mlp"]
    hidden: tuple[int, ...]
    """Widths of the hidden layers, e.g. ``(64, 64)``."""
    activation: Activation
    optimizer: Optimizer
    lr: float
    weight_decay: float
    class_weight: ClassWeight
    """``"balanced"`` weights the positive rows' loss by ``n_negative / n_positive``
    of the training rows (the ratio scikit-learn's ``class_weight="balanced"``
    gives); ``"prevalence"`` by ``(1 - prevalence) / prevalence``, a published rate."""
    epochs: int
    batch_size: int
    seed: int
    """Seeds initialisation, batch order, PGD starts and DP noise."""
    train_subset: int | None = None
    """Train on the *first* rows only (to overfit deliberately). The first rows
    are also the members the membership attacks query (§3.2 step 4), so every
    queried member is a row the model was trained on."""
    prevalence: float | None = None
    """The published positive rate ``class_weight = "prevalence"`` weights by."""
    standardisation: Standardisation | None = None
    adversarial_training: AdversarialTraining | None = None
    differential_privacy: DifferentialPrivacy | None = None
    gradient_clipping: GradientClipping | None = None

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
        if (self.class_weight == "prevalence") != (self.prevalence is not None):
            raise RecipeError(
                "mlp: prevalence is needed with class_weight = 'prevalence', and only then"
            )
        if self.prevalence is not None and not 0 < self.prevalence < 1:
            raise RecipeError(f"mlp: prevalence must lie in (0, 1), got {self.prevalence!r}")
        defences = [name for name in DEFENCES if getattr(self, name) is not None]
        if len(defences) > 1:
            raise RecipeError(f"mlp: choose one defence table, got {' and '.join(defences)}")
        if self.differential_privacy:
            # SPEC §7.4: epsilon must cover the whole artifact and its training.
            if self.standardisation is None:
                raise RecipeError(
                    "mlp: differential_privacy needs [model.standardisation] from public "
                    "constants: the training rows' mean and std would enter the program "
                    "outside the accountant"
                )
            if self.class_weight == "balanced":
                raise RecipeError(
                    "mlp: differential_privacy needs class_weight = 'none' or 'prevalence' "
                    "(a published rate): 'balanced' counts the private labels outside the "
                    "accountant"
                )

    @property
    def defence(self) -> str | None:
        """The name of the defence table, or ``None`` for the undefended base recipe."""
        return next((name for name in DEFENCES if getattr(self, name) is not None), None)

    def without_defence(self) -> MLPRecipe:
        """The base recipe: this one with no defence table (SPEC §7.4)."""
        return dataclasses.replace(
            self, adversarial_training=None, differential_privacy=None, gradient_clipping=None
        )

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
            kind = "DP-SGD" if self.optimizer == "sgd" else "DP-Adam"
            text += f", {kind} (sigma={dp.noise_multiplier:g}, C={dp.max_grad_norm:g})"
        if self.gradient_clipping:
            text += f", clipped per example (C={self.gradient_clipping.max_grad_norm:g}, no noise)"
        return text


@dataclasses.dataclass(frozen=True)
class TrainingRecord:
    """What training did, for the reference and the manifest.

    ``epsilon`` is the (epsilon, delta)-DP guarantee Opacus' accountant gives
    for the steps actually taken; ``None`` without DP. ``epsilon_covers`` says
    what it covers, and where everything else in the artifact came from.
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
    epsilon_covers: str | None = None
    cpu_capability: str | None = None
    """The kernels torch chose on the building CPU (``DEFAULT``, ``AVX2``, ``AVX512``):
    float32 training on another capability can give other weights (SPEC §7.1)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
