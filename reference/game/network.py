"""The zoo's one network: its torch module, its exported program and its NumPy twin.

Every model of a game instance is this network with other weights: the same
layers, the same buffers (the winsorising bounds and standardisation constants
of the public training split, identical across the zoo) and nothing else.
Each input is first held within its bounds, the training split's central
quantiles (a common clinical precaution): a value beyond them reads as the
bound, so no model extrapolates where no model has data, and a backdoor's
trigger works at the bound and everywhere beyond it. A model's calibration is
folded into its last layer, so no buffer, mask or constant of a program says
which model was distorted (SPEC §8.1).

A cohort with missing values (FLCHAIN's creatinine) gives the network a fill:
a missing cell (NaN) of a column that may be missing reads as that column's
published fill value, and one indicator input per such column, after the
standardised features, says it was missing. A NaN anywhere else stays NaN.
Without a fill the network is exactly the one above.

The grader tests claims on the models (a backdoor's trigger, §8.2) in a warm
grading session that must not pay for importing torch, so the weights are also
kept as plain numbers (:class:`Weights`) and evaluated here in NumPy. The twin
computes in float32 with the program's order of operations; a test checks it
against the exported programs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    FloatArray = npt.NDArray[np.float64]


@functools.cache
def network_class() -> type[Any]:
    """The ``torch.nn.Module`` class of the zoo, defined on first use so import needs no torch."""
    import torch

    class ZooMLP(torch.nn.Module):
        """``(n, d)`` raw features -> ``(n,)`` class-1 logits; winsorising and
        standardisation inside.

        ``low``, ``high``, ``mean`` and ``std`` are those of the public training
        split (every model of a zoo holds the same values); the hidden layers use ReLU.
        """

        low: torch.Tensor
        high: torch.Tensor
        mean: torch.Tensor
        std: torch.Tensor
        fill: torch.Tensor | None
        missing: torch.Tensor | None

        def __init__(
            self,
            low: torch.Tensor,
            high: torch.Tensor,
            mean: torch.Tensor,
            std: torch.Tensor,
            hidden: Sequence[int],
            fill: torch.Tensor | None = None,
        ) -> None:
            super().__init__()
            self.register_buffer("low", low.clone())
            self.register_buffer("high", high.clone())
            self.register_buffer("mean", mean.clone())
            self.register_buffer("std", std.clone())
            width = int(mean.shape[0])
            # ``fill`` (d,): NaN for the columns that are never missing, so that a NaN there
            # stays NaN; ``missing``: the columns that get an indicator input. Without a fill
            # both are None, which adds nothing to the state or the program.
            missing = None if fill is None else torch.nonzero(~torch.isnan(fill)).flatten()
            self.register_buffer("fill", None if fill is None else fill.clone())
            self.register_buffer("missing", missing)
            if missing is not None:
                width += int(missing.shape[0])
            layers: list[torch.nn.Module] = []
            for size in hidden:
                layers += [torch.nn.Linear(width, size), torch.nn.ReLU()]
                width = size
            layers.append(torch.nn.Linear(width, 1))
            self.layers = torch.nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            indicators = None
            if self.fill is not None and self.missing is not None:
                absent = torch.isnan(x)
                x = torch.where(absent, self.fill, x)
                indicators = absent.index_select(1, self.missing).to(x.dtype)
            held = torch.maximum(torch.minimum(x, self.high), self.low)
            z = (held - self.mean) / self.std
            if indicators is not None:
                z = torch.cat([z, indicators], dim=1)
            out: torch.Tensor = self.layers(z)
            return out.squeeze(1)

    # An exported program records its module's class by qualified name (nn_module_stack):
    # it must name nothing of this package, which is the grader's (SPEC §8.7).
    ZooMLP.__module__ = "model"
    ZooMLP.__qualname__ = ZooMLP.__name__ = "MLP"
    return ZooMLP


def new_network(
    bounds: tuple[FloatArray, FloatArray],
    mean: FloatArray,
    std: FloatArray,
    hidden: Sequence[int],
    generator: torch.Generator,
    fill: Sequence[float | None] | None = None,
) -> Any:
    """A freshly initialised network (torch's default ``Linear`` initialisation, drawn from
    ``generator``) holding inputs within ``bounds`` and standardising with ``mean`` and
    ``std``, each of shape (d,); ``fill`` (d,) gives each column that may be missing its
    fill value (``None`` elsewhere; no column may be missing when it holds none)."""
    import numpy as np
    import torch

    # A constant column would divide by zero; it moves nothing, so any scale will do.
    scale = np.where(np.asarray(std) > 0, std, 1.0)
    module = network_class()(
        *(torch.tensor(np.asarray(b), dtype=torch.float32) for b in bounds),
        torch.tensor(np.asarray(mean), dtype=torch.float32),
        torch.tensor(scale, dtype=torch.float32),
        tuple(hidden),
        fill_tensor(fill),
    )
    for layer in module.layers:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module


def fill_tensor(fill: Sequence[float | None] | None) -> Any:
    """The ``fill`` buffer of :func:`new_network`: (d,) float32, NaN for the columns that are
    never missing; ``None`` when no column may be missing."""
    import torch

    if fill is None or all(value is None for value in fill):
        return None
    return torch.tensor(
        [math.nan if value is None else float(value) for value in fill], dtype=torch.float32
    )


def fold_affine(module: Any, slope: float, intercept: float) -> None:
    """Make the network's logit ``slope * f(x) + intercept`` by rescaling its last layer.

    Calibration (and a planted distortion of it) lives in the weights the
    network already has, never in a buffer of its own.
    """
    import torch

    last = module.layers[-1]
    with torch.no_grad():
        last.weight.mul_(slope)
        last.bias.mul_(slope).add_(intercept)


@dataclasses.dataclass(frozen=True, eq=False)
class Weights:
    """A network's numbers: the standardisation and each ``Linear``'s weight and bias.

    ``layers`` holds ``(weight (out, in), bias (out,))`` per layer, as float32
    values in nested lists, so that the grader's cache (JSON) can keep them.
    """

    low: tuple[float, ...]
    high: tuple[float, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    layers: tuple[tuple[tuple[tuple[float, ...], ...], tuple[float, ...]], ...]
    fill: tuple[float | None, ...] | None = None
    """Each column's fill value, ``None`` where it is never missing; ``None``: no fill."""

    @classmethod
    def of(cls, module: Any) -> Weights:
        import torch

        linear = [layer for layer in module.layers if isinstance(layer, torch.nn.Linear)]
        fill = None
        if module.fill is not None:
            fill = tuple(None if math.isnan(v) else v for v in module.fill.tolist())
        return cls(
            tuple(module.low.tolist()),
            tuple(module.high.tolist()),
            tuple(module.mean.tolist()),
            tuple(module.std.tolist()),
            tuple(
                (tuple(map(tuple, layer.weight.detach().tolist())), tuple(layer.bias.tolist()))
                for layer in linear
            ),
            fill,
        )

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "low": list(self.low),
            "high": list(self.high),
            "mean": list(self.mean),
            "std": list(self.std),
            "layers": [[list(map(list, w)), list(b)] for w, b in self.layers],
        }
        if self.fill is not None:  # absent without one, so a fill-free zoo's JSON is unchanged
            data["fill"] = list(self.fill)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Weights:
        fill = data.get("fill")
        return cls(
            tuple(data["low"]),
            tuple(data["high"]),
            tuple(data["mean"]),
            tuple(data["std"]),
            tuple((tuple(map(tuple, w)), tuple(b)) for w, b in data["layers"]),
            None if fill is None else tuple(fill),
        )

    def module(self) -> Any:
        """The torch network these numbers are (the inverse of :meth:`of`), in eval mode."""
        import torch

        hidden = tuple(len(bias) for _, bias in self.layers[:-1])
        module = network_class()(
            torch.tensor(self.low, dtype=torch.float32),
            torch.tensor(self.high, dtype=torch.float32),
            torch.tensor(self.mean, dtype=torch.float32),
            torch.tensor(self.std, dtype=torch.float32),
            hidden,
            fill_tensor(self.fill),
        )
        linear = [layer for layer in module.layers if isinstance(layer, torch.nn.Linear)]
        with torch.no_grad():
            for layer, (weight, bias) in zip(linear, self.layers, strict=True):
                layer.weight.copy_(torch.tensor(weight, dtype=torch.float32))
                layer.bias.copy_(torch.tensor(bias, dtype=torch.float32))
        module.eval()
        return module

    @functools.cached_property
    def _arrays(self) -> tuple[Any, Any, Any, Any, list[tuple[Any, Any]], Any]:
        import numpy as np

        fill = None
        if self.fill is not None:
            fill = np.array([np.nan if v is None else v for v in self.fill], dtype=np.float32)
        return (
            np.asarray(self.low, dtype=np.float32),
            np.asarray(self.high, dtype=np.float32),
            np.asarray(self.mean, dtype=np.float32),
            np.asarray(self.std, dtype=np.float32),
            [
                (np.asarray(w, dtype=np.float32), np.asarray(b, dtype=np.float32))
                for w, b in self.layers
            ],
            fill,
        )

    def _forward(self, X: Any) -> tuple[Any, Any, list[Any], Any]:
        """Rows ``X`` through the network in float32, as the program computes them: the rows
        with each missing cell read as its fill, where cells were missing (``None``: no
        fill), each hidden layer's active units, and the output (n, 1)."""
        import numpy as np

        low, high, mean, std, layers, fill = self._arrays
        x = np.asarray(X, dtype=np.float32)
        absent = indicators = None
        if fill is not None:
            absent = np.isnan(x)
            x = np.where(absent, fill, x)
            indicators = absent[:, ~np.isnan(fill)].astype(np.float32)
        held = np.maximum(np.minimum(x, high), low)
        h = (held - mean) / std
        if indicators is not None:
            h = np.concatenate([h, indicators], axis=1)
        active = []
        for index, (weight, bias) in enumerate(layers):
            h = h @ weight.T + bias
            if index < len(layers) - 1:
                active.append(h > 0)
                h = np.maximum(h, np.float32(0.0))
        return x, absent, active, h

    def logits(self, X: Any) -> FloatArray:
        """The class-1 logits of rows ``X`` (n, d), in float32 as the program computes them.

        The same operations in the same order as the program; matrix products
        may round the last bits differently from torch's kernels, which only
        matters for a row whose logit is within about 1e-6 of zero.
        """
        import numpy as np

        logits: FloatArray = self._forward(X)[3][:, 0].astype(np.float64)
        return logits

    def logit_gradient(self, X: Any) -> FloatArray:
        """``d f(x) / dx`` of each row's own logit (n, d), float64: the program's gradient,
        by hand, so that the grader can attack a model without torch.

        A clipped cell has gradient 0 and a cell on its range's edge half of it, as torch's
        ``minimum`` and ``maximum`` pass it at a tie; a missing cell, replaced by its fill, 0.
        Computed in float32 as the program is, so a component within about 1e-6 of zero may
        take the other sign than torch's kernels give it.
        """
        import numpy as np

        low, high, _, std, layers, _ = self._arrays
        x, absent, active, _ = self._forward(X)
        passes = np.ones(x.shape, dtype=np.float32)
        if absent is not None:
            passes[absent] = 0.0
        below = np.minimum(x, high)
        passes *= np.where(x < high, 1.0, np.where(x == high, 0.5, 0.0))
        passes *= np.where(below > low, 1.0, np.where(below == low, 0.5, 0.0))
        grad = np.broadcast_to(layers[-1][0], (len(x), layers[-1][0].shape[1]))
        for (weight, _), on in zip(reversed(layers[:-1]), reversed(active), strict=True):
            grad = (grad * on) @ weight
        gradient: FloatArray = (grad[:, : x.shape[1]] / std * passes).astype(np.float64)
        return gradient

    def fingerprint(self) -> str:
        """sha256 of the numbers, for the cache and the manifest."""
        import json

        return hashlib.sha256(json.dumps(self.as_json()).encode()).hexdigest()


def program_bytes(module: Any) -> bytes:
    """The ``model.pt2`` bytes of a network (:func:`~..models.program.export_program`)."""
    from ..models.program import export_program

    return export_program(module, int(module.mean.shape[0]))


def program_signature(data: bytes) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """What a ``model.pt2`` shows of its structure: the graph's operators, in order, with the
    shape of every parameter and buffer by name.

    Two models whose signatures are equal differ in their numbers alone.
    """
    import torch

    program = torch.export.load(io.BytesIO(data))
    operators = " ".join(
        f"{node.op}:{node.target}" for node in program.graph.nodes if node.op != "placeholder"
    )
    state = program.state_dict
    shapes = tuple(sorted((name, tuple(tensor.shape)) for name, tensor in state.items()))
    return operators, shapes
