"""Torch MLPs of the "sps-v1-wb" variants (SPEC §7): recipes, training, ``model.pt2``.

A recipe (:class:`MLPRecipe`) says how to train a small multilayer perceptron,
optionally with PGD adversarial training (:class:`AdversarialTraining`, Madry
et al. 2018) or DP-SGD (:class:`DifferentialPrivacy`, Abadi et al. 2016, with
Opacus). :func:`build_mlp` trains it and exports it as the bytes of a
``model.pt2`` (:class:`TorchArtifact`); :class:`TorchClassifier` wraps a loaded
program in the interface the batched attacks call.

Determinism: training runs on one intra-op thread with deterministic algorithms
and seeded generators, inside a forked random state, so the same recipe and
data give byte-identical artifacts twice on one machine, and the caller's
global torch state (threads, seeds, determinism flag) is left as it was.

Importing this module is cheap: torch (and Opacus, for DP recipes) is imported
by the functions that need it, never at module level.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import math
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .recipes import RecipeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    from .data import Dataset

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

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


# ------------------------------------------------------------------ determinism


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread (training, export and evaluation alike), restored on exit."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def pinned_torch(seed: int) -> Iterator[torch.Generator]:
    """One intra-op thread, deterministic algorithms, a forked global RNG seeded
    with ``seed``; yields a generator seeded with ``seed`` for explicit draws.

    Threads change the order of floating-point sums inside matrix products, so
    one thread is what makes training repeat to the bit. Everything is restored
    on exit, so callers' torch state is untouched.
    """
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with one_thread(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield torch.Generator().manual_seed(seed)
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


# ------------------------------------------------------------------------ model


@functools.cache
def _mlp_class() -> type[Any]:
    """The ``torch.nn.Module`` class, defined on first use so import needs no torch."""
    import torch

    class StandardisedMLP(torch.nn.Module):
        """``(n, d)`` raw features -> ``(n,)`` class-1 logits; standardisation inside."""

        mean: torch.Tensor
        std: torch.Tensor

        def __init__(
            self, mean: torch.Tensor, std: torch.Tensor, hidden: tuple[int, ...], activation: str
        ) -> None:
            super().__init__()
            self.register_buffer("mean", mean)
            self.register_buffer("std", std)
            act = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[activation]
            layers: list[torch.nn.Module] = []
            width = int(mean.shape[0])
            for size in hidden:
                layers += [torch.nn.Linear(width, size), act()]
                width = size
            layers.append(torch.nn.Linear(width, 1))
            self.layers = torch.nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.layers((x - self.mean) / self.std)
            return out.squeeze(1)

    return StandardisedMLP


def _new_module(recipe: MLPRecipe, X: torch.Tensor, generator: torch.Generator) -> Any:
    """A freshly initialised model whose buffers standardise like ``X``'s rows."""
    import torch

    mean = X.double().mean(dim=0)
    std = X.double().std(dim=0, correction=0)
    # A constant feature would divide by zero; StandardScaler uses 1 for it too.
    std = torch.where(std == 0, torch.ones_like(std), std)
    module = _mlp_class()(mean.float(), std.float(), recipe.hidden, recipe.activation)
    for layer in module.layers:
        if isinstance(layer, torch.nn.Linear):
            # torch's default Linear initialisation, drawn from our generator.
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module


def _optimizer(recipe: MLPRecipe, module: Any) -> Any:
    import torch

    if recipe.optimizer == "adam":
        return torch.optim.Adam(module.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.SGD(module.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)


# --------------------------------------------------------------------- training


def _loss(logits: torch.Tensor, y: torch.Tensor, pos_weight: torch.Tensor | None) -> torch.Tensor:
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)


def _pos_weight(recipe: MLPRecipe, y: torch.Tensor) -> torch.Tensor | None:
    import torch

    if recipe.class_weight == "none":
        return None
    positives = float(y.sum())
    if positives in (0.0, float(len(y))):
        raise RecipeError("mlp: class_weight = 'balanced' needs both classes in the training rows")
    return torch.tensor((len(y) - positives) / positives, dtype=torch.float32)


def _pgd_batch(
    module: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    at: AdversarialTraining,
    scale: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    generator: torch.Generator,
    pos_weight: torch.Tensor | None,
) -> torch.Tensor:
    """Madry et al.'s inner maximisation for one minibatch, in raw feature units."""
    import torch

    bound = at.epsilon * scale
    step = at.step_size * scale
    lo, hi = torch.maximum(x - bound, low), torch.minimum(x + bound, high)
    adv = x.clone()
    if at.random_start:
        noise = torch.rand(x.shape, generator=generator, dtype=x.dtype) * 2.0 - 1.0
        adv = torch.clamp(adv + noise * bound, lo, hi)
    for _ in range(at.steps):
        adv.requires_grad_(True)
        loss = _loss(module(adv), y, pos_weight)
        (grad,) = torch.autograd.grad(loss, adv)
        adv = torch.clamp(adv.detach() + step * grad.sign(), lo, hi)
    return adv.detach()


def _train_plain(
    recipe: MLPRecipe, module: Any, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator
) -> tuple[int, float]:
    """Minibatch training, optionally adversarial; returns (steps, last epoch's mean loss)."""
    import torch

    optimizer = _optimizer(recipe, module)
    pos_weight = _pos_weight(recipe, y)
    at = recipe.adversarial_training
    scale = module.std
    low, high = X.min(dim=0).values, X.max(dim=0).values
    steps, last = 0, math.nan
    for _ in range(recipe.epochs):
        order = torch.randperm(len(X), generator=generator)
        total = 0.0
        for start in range(0, len(X), recipe.batch_size):
            batch = order[start : start + recipe.batch_size]
            xb, yb = X[batch], y[batch]
            if at is not None:
                xb = _pgd_batch(module, xb, yb, at, scale, low, high, generator, pos_weight)
            optimizer.zero_grad()
            loss = _loss(module(xb), yb, pos_weight)
            torch.autograd.backward(loss)
            optimizer.step()
            total += float(loss.detach()) * len(batch)
            steps += 1
        last = total / len(X)
    return steps, last


def _train_private(
    recipe: MLPRecipe, module: Any, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator
) -> tuple[int, float, float]:
    """DP-SGD through Opacus; returns (steps, last epoch's mean loss, achieved epsilon)."""
    import torch
    from opacus import PrivacyEngine  # type: ignore[import-untyped]

    dp = recipe.differential_privacy
    assert dp is not None
    with warnings.catch_warnings():
        # Opacus warns that its default RNG is not cryptographically secure. We
        # want the opposite: seeded, repeatable noise for a reference artifact
        # (secure_mode would make the artifact unrepeatable by design).
        warnings.filterwarnings("ignore", message="Secure RNG turned off", category=UserWarning)
        engine = PrivacyEngine(accountant=dp.accountant)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y),
        batch_size=recipe.batch_size,
        shuffle=True,
        generator=generator,  # Opacus' Poisson sampler draws from this generator
    )
    private, optimizer, loader = engine.make_private(
        module=module,
        optimizer=_optimizer(recipe, module),
        data_loader=loader,
        noise_multiplier=dp.noise_multiplier,
        max_grad_norm=dp.max_grad_norm,
        noise_generator=generator,
    )
    with warnings.catch_warnings():
        # Opacus collects per-example gradients with full backward hooks; torch
        # warns that they fire although the inputs need no gradient. They need
        # none: the hooks only read the layers' activations and output grads.
        warnings.filterwarnings(
            "ignore", message="Full backward hook is firing", category=UserWarning
        )
        steps, last = _private_epochs(
            private, optimizer, loader, recipe.epochs, _pos_weight(recipe, y)
        )
    return steps, last, float(engine.get_epsilon(dp.delta))


def _private_epochs(
    private: Any, optimizer: Any, loader: Any, epochs: int, pos_weight: torch.Tensor | None
) -> tuple[int, float]:
    import torch

    steps, last = 0, math.nan
    for _ in range(epochs):
        total, seen = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = _loss(private(xb), yb, pos_weight)
            torch.autograd.backward(loss)
            optimizer.step()
            steps += 1
            if len(xb):
                # An empty Poisson batch (probability about exp(-batch_size))
                # has a NaN mean loss but no per-example gradients: Opacus adds
                # noise only, and the step counts for privacy all the same.
                total += float(loss.detach()) * len(xb)
                seen += len(xb)
        last = total / max(seen, 1)
    return steps, last


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedMLP:
    """A trained model (``torch.nn.Module``, eval mode) and its training record."""

    module: Any
    record: TrainingRecord


def training_rows(recipe: MLPRecipe, data: Dataset) -> tuple[FloatArray, IntArray]:
    """The rows a recipe trains on: all training rows, or the first ``train_subset``."""
    n = data.n_train if recipe.train_subset is None else min(recipe.train_subset, data.n_train)
    return data.X_train[:n], data.y_train[:n]


def train_mlp(recipe: MLPRecipe, data: Dataset) -> TrainedMLP:
    """Train the recipe on the dataset's training rows, deterministically.

    Returns a fresh module (not Opacus' wrapper, whose hooks must not be
    exported) holding the trained weights, in eval mode.
    """
    import torch

    X_np, y_np = training_rows(recipe, data)
    with pinned_torch(recipe.seed) as generator:
        X = torch.tensor(X_np, dtype=torch.float32)
        y = torch.tensor(y_np, dtype=torch.float32)
        module = _new_module(recipe, X, generator)
        epsilon = None
        opacus_version = None
        if recipe.differential_privacy is None:
            steps, last = _train_plain(recipe, module, X, y, generator)
        else:
            import opacus

            steps, last, epsilon = _train_private(recipe, module, X, y, generator)
            opacus_version = opacus.__version__
        clean = _mlp_class()(module.mean, module.std, recipe.hidden, recipe.activation)
        clean.load_state_dict(module.state_dict())
        clean.eval()
    dp = recipe.differential_privacy
    record = TrainingRecord(
        n_rows=len(X_np),
        steps=steps,
        final_loss=last,
        epsilon=epsilon,
        delta=None if dp is None else dp.delta,
        accountant=None if dp is None else dp.accountant,
        torch_version=torch.__version__,
        opacus_version=opacus_version,
    )
    return TrainedMLP(clean, record)


# --------------------------------------------------------------------- artifact


def export_program(module: Any, n_features: int) -> bytes:
    """``torch.export.save`` bytes of ``module`` with a dynamic batch dimension.

    The pt2 archive's zip entries carry a fixed 1980 timestamp and its
    ``serialization_id`` is derived from the content, so the bytes are a
    function of the program. The one thing that is not is each graph node's
    ``stack_trace`` metadata: it holds the absolute path of this file, so the
    same model built from two checkouts would differ. It is debugging
    information only, so it is removed before saving.
    """
    import torch

    module.eval()
    batch = torch.export.Dim("batch", min=1)
    # An example batch of 2: torch.export specialises sizes 0 and 1.
    example = torch.zeros(2, n_features, dtype=torch.float32)
    with one_thread():
        program = torch.export.export(module, (example,), dynamic_shapes={"x": {0: batch}})
    for node in program.graph.nodes:
        node.meta.pop("stack_trace", None)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


@dataclasses.dataclass(frozen=True, eq=False)
class TorchArtifact:
    """The bytes of a ``model.pt2`` and the sha256 that identifies the model."""

    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def write(self, path: Path) -> None:
        path.write_bytes(self.data)

    def load(self) -> TorchClassifier:
        """The program, loaded with torch alone and wrapped for the attacks."""
        return TorchClassifier.from_bytes(self.data)


@dataclasses.dataclass(frozen=True, eq=False)
class BuiltMLP:
    """A recipe's artifact, its training record and the seconds each stage took."""

    artifact: TorchArtifact
    record: TrainingRecord
    seconds: dict[str, float]


def build_mlp(recipe: MLPRecipe, data: Dataset) -> BuiltMLP:
    """Train the recipe and export it: the ``model.pt2`` an agent receives."""
    start = time.perf_counter()
    trained = train_mlp(recipe, data)
    trained_at = time.perf_counter()
    artifact = TorchArtifact(export_program(trained.module, len(data.feature_names)))
    seconds = {
        "train": round(trained_at - start, 4),
        "export": round(time.perf_counter() - trained_at, 4),
    }
    return BuiltMLP(artifact, trained.record, seconds)


# ---------------------------------------------------------------------- adapter


class TorchClassifier:
    """A loaded ``model.pt2`` with the classifier interface the attacks call.

    ``f`` maps float32 (n, d) raw features to float32 (n,) class-1 logits
    (SPEC §7.1). Then ``p(X) = sigmoid(f(X))`` in float32, widened to float64,
    and ``pred(X) = f(X) > 0``.

    Rows are evaluated in chunks of exactly :attr:`CHUNK` rows, the last one
    padded with copies of its last row. A matrix product may round a row
    differently depending on how many rows share the call (measured on this
    CPU build: when the row count is not a multiple of 4, the remainder rows
    take another kernel), so without fixed chunks ``p`` of a row would depend
    on which other rows the auditor happened to query with it. With them, each
    row's logit is a function of that row alone. A row-at-a-time evaluation
    (one row per call) may still differ in the last float32 bit; SPEC §7.1
    allows for that and the reference evaluates in batches.
    """

    CHUNK = 512

    def __init__(self, module: Any) -> None:
        self.module = module

    @classmethod
    def from_bytes(cls, data: bytes) -> TorchClassifier:
        import torch

        with one_thread():
            program = torch.export.load(io.BytesIO(data))
        return cls(program.module())

    @classmethod
    def from_file(cls, path: Path | str) -> TorchClassifier:
        return cls.from_bytes(Path(path).read_bytes())

    def _chunks(self, X: Any) -> Iterator[tuple[torch.Tensor, int]]:
        """Float32 chunks of exactly CHUNK rows, and how many rows of each are real."""
        import numpy as np
        import torch

        # A copy: the datasets' arrays are read-only, which torch warns about.
        rows = torch.from_numpy(np.array(X, dtype=np.float32))
        if rows.ndim != 2:
            raise ValueError(f"expected a 2-d array of rows, got shape {tuple(rows.shape)}")
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            real = len(chunk)
            if real < self.CHUNK:
                chunk = torch.cat([chunk, chunk[-1:].expand(self.CHUNK - real, -1)])
            yield chunk, real

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.module(x)
        if out.shape != (len(x),):
            raise ValueError(
                f"the model returned shape {tuple(out.shape)} for {len(x)} rows; "
                "expected one class-1 logit per row, shape (n,)"
            )
        return out

    def logits(self, X: Any) -> Any:
        """``f(X)``: float32 logits of class 1, shape (n,)."""
        import numpy as np
        import torch

        parts = [np.empty(0, dtype=np.float32)]
        with one_thread(), torch.no_grad():
            for chunk, real in self._chunks(X):
                parts.append(self._logits(chunk)[:real].numpy())
        return np.concatenate(parts)

    def predict_proba(self, X: Any) -> FloatArray:
        """``[1 - p, p]`` with ``p = sigmoid(f(X))`` in float32 then float64, shape (n, 2)."""
        import numpy as np
        import torch

        p = torch.sigmoid(torch.from_numpy(self.logits(X))).double().numpy()
        proba: FloatArray = np.column_stack([1.0 - p, p])
        return proba

    def predict(self, X: Any) -> IntArray:
        """``f(X) > 0`` as 0/1, shape (n,)."""
        import numpy as np

        pred: IntArray = (self.logits(X) > 0).astype(np.int64)
        return pred

    def row_losses(self, X: Any, y: Any) -> FloatArray:
        """Binary cross-entropy of each row's logit against ``y``, shape (n,).

        Evaluated in float64 from the float32 logit, as ``softplus(-f)`` for
        label 1 and ``softplus(f)`` for label 0. In float32 the loss of every
        row with ``|f|`` above about 17 (confidently right) rounds to exactly
        0: on an overfit ICU model a quarter of all rows tie at 0 and a
        loss-ranking attack cannot order them.
        """
        import numpy as np

        z = self.logits(X).astype(np.float64)
        positive = np.asarray(y) == 1
        if z.shape != positive.shape:
            raise ValueError(f"{len(z)} rows but {positive.size} labels")
        losses: FloatArray = np.logaddexp(0.0, np.where(positive, -z, z))
        return losses

    def loss_gradient(self, X: Any, y: Any) -> FloatArray:
        """``d/dX`` of the summed binary cross-entropy (SPEC §7.2 step 3), shape (n, d).

        The sum's gradient with respect to one row is that row's own loss
        gradient, so chunks (and padding rows, dropped) change nothing.
        """
        import numpy as np
        import torch

        labels = torch.from_numpy(np.array(y, dtype=np.float32))
        parts = []
        start = 0
        with one_thread():
            for chunk, real in self._chunks(X):
                target = labels[start : start + real]
                if real < self.CHUNK:
                    target = torch.cat([target, target[-1:].expand(self.CHUNK - real)])
                x = chunk.clone().requires_grad_(True)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    self._logits(x), target, reduction="sum"
                )
                (grad,) = torch.autograd.grad(loss, x)
                parts.append(grad[:real].double().numpy())
                start += real
        if not parts:
            return np.empty((0, np.asarray(X).shape[1]))
        gradient: FloatArray = np.concatenate(parts)
        return gradient
