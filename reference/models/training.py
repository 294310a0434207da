"""Deterministic training of an :class:`~.mlp.MLPRecipe`: plain, PGD-trained, DP-SGD or clipped.

The same recipe and data give byte-identical weights twice on one machine
(:mod:`.determinism`); another CPU may pick other float32 kernels (SPEC §7.1).
torch, and Opacus for DP recipes, are imported by the functions that need them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import TYPE_CHECKING, Any

from .determinism import pinned_torch
from .mlp import AdversarialTraining, MLPRecipe, TrainingRecord
from .recipes import RecipeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    from ..data import Dataset

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


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


def _standardisation(recipe: MLPRecipe, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The program's ``mean`` and ``std`` buffers: the recipe's public constants, or
    (without them) the training rows' mean and population standard deviation."""
    import torch

    public = recipe.standardisation
    if public is not None:
        if len(public.center) != X.shape[1]:
            raise RecipeError(
                f"mlp: standardisation has {len(public.center)} constants per array, "
                f"the data {X.shape[1]} features"
            )
        center = torch.tensor(public.center, dtype=torch.float64)
        return center, torch.tensor(public.scale, dtype=torch.float64)
    mean = X.double().mean(dim=0)
    std = X.double().std(dim=0, correction=0)
    # A constant feature would divide by zero; StandardScaler uses 1 for it too.
    return mean, torch.where(std == 0, torch.ones_like(std), std)


def _new_module(recipe: MLPRecipe, X: torch.Tensor, generator: torch.Generator) -> Any:
    """A freshly initialised model whose buffers standardise as the recipe says."""
    import torch

    mean, std = _standardisation(recipe, X)
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


def _loss(logits: torch.Tensor, y: torch.Tensor, pos_weight: torch.Tensor | None) -> torch.Tensor:
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)


def _pos_weight(recipe: MLPRecipe, y: torch.Tensor) -> torch.Tensor | None:
    """The positive rows' loss weight: none, a published rate's odds, or the labels' own."""
    import torch

    if recipe.class_weight == "none":
        return None
    if recipe.prevalence is not None:
        # A published rate, not a count of the private labels (SPEC §7.4).
        return torch.tensor((1.0 - recipe.prevalence) / recipe.prevalence, dtype=torch.float32)
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
) -> tuple[int, float, float | None]:
    """DP-SGD through Opacus, or its ablation without noise (``gradient_clipping``).

    Returns (steps, last epoch's mean loss, achieved epsilon or ``None`` without noise).
    Both defences take this path, so clipping, Poisson batches and the random
    stream are the same and only the noise differs between them.
    """
    import torch
    from opacus import PrivacyEngine  # type: ignore[import-untyped]

    dp = recipe.differential_privacy
    if dp is not None:
        noise, max_grad_norm, accountant = dp.noise_multiplier, dp.max_grad_norm, dp.accountant
    else:
        assert recipe.gradient_clipping is not None
        noise, max_grad_norm, accountant = 0.0, recipe.gradient_clipping.max_grad_norm, "prv"
    with warnings.catch_warnings():
        # Opacus warns that its default RNG is not cryptographically secure. We
        # want the opposite: seeded, repeatable noise for a reference artifact
        # (secure_mode would make the artifact unrepeatable by design).
        warnings.filterwarnings("ignore", message="Secure RNG turned off", category=UserWarning)
        engine = PrivacyEngine(accountant=accountant)
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
        noise_multiplier=noise,
        max_grad_norm=max_grad_norm,
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
    return steps, last, None if dp is None else float(engine.get_epsilon(dp.delta))


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
        if recipe.differential_privacy is None and recipe.gradient_clipping is None:
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
        epsilon_covers=epsilon_covers(recipe),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
    )
    return TrainedMLP(clean, record)


def epsilon_covers(recipe: MLPRecipe) -> str | None:
    """What a DP recipe's epsilon covers, and where the rest of the artifact comes from."""
    if recipe.differential_privacy is None:
        return None
    public = recipe.standardisation
    assert public is not None  # MLPRecipe refuses DP without it
    weight = (
        "no class weight"
        if recipe.prevalence is None
        else f"class weight from the published prevalence {recipe.prevalence:g}"
    )
    return (
        "every weight and bias of the program: each DP-SGD step on the training rows "
        "(initialisation and batch order are seeded, not data-dependent); the program's "
        f"standardisation buffers are public constants ({public.source}) and the loss "
        f"uses {weight}: no statistic of the training rows enters the artifact outside "
        "the accountant"
    )
