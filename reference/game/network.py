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

        def __init__(
            self,
            low: torch.Tensor,
            high: torch.Tensor,
            mean: torch.Tensor,
            std: torch.Tensor,
            hidden: Sequence[int],
        ) -> None:
            super().__init__()
            self.register_buffer("low", low.clone())
            self.register_buffer("high", high.clone())
            self.register_buffer("mean", mean.clone())
            self.register_buffer("std", std.clone())
            layers: list[torch.nn.Module] = []
            width = int(mean.shape[0])
            for size in hidden:
                layers += [torch.nn.Linear(width, size), torch.nn.ReLU()]
                width = size
            layers.append(torch.nn.Linear(width, 1))
            self.layers = torch.nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            held = torch.maximum(torch.minimum(x, self.high), self.low)
            out: torch.Tensor = self.layers((held - self.mean) / self.std)
            return out.squeeze(1)

    return ZooMLP


def new_network(
    bounds: tuple[FloatArray, FloatArray],
    mean: FloatArray,
    std: FloatArray,
    hidden: Sequence[int],
    generator: torch.Generator,
) -> Any:
    """A freshly initialised network (torch's default ``Linear`` initialisation, drawn from
    ``generator``) holding inputs within ``bounds`` and standardising with ``mean`` and
    ``std``, each of shape (d,)."""
    import numpy as np
    import torch

    # A constant column would divide by zero; it moves nothing, so any scale will do.
    scale = np.where(np.asarray(std) > 0, std, 1.0)
    module = network_class()(
        *(torch.tensor(np.asarray(b), dtype=torch.float32) for b in bounds),
        torch.tensor(np.asarray(mean), dtype=torch.float32),
        torch.tensor(scale, dtype=torch.float32),
        tuple(hidden),
    )
    for layer in module.layers:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module


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

    @classmethod
    def of(cls, module: Any) -> Weights:
        import torch

        linear = [layer for layer in module.layers if isinstance(layer, torch.nn.Linear)]
        return cls(
            tuple(module.low.tolist()),
            tuple(module.high.tolist()),
            tuple(module.mean.tolist()),
            tuple(module.std.tolist()),
            tuple(
                (tuple(map(tuple, layer.weight.detach().tolist())), tuple(layer.bias.tolist()))
                for layer in linear
            ),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "low": list(self.low),
            "high": list(self.high),
            "mean": list(self.mean),
            "std": list(self.std),
            "layers": [[list(map(list, w)), list(b)] for w, b in self.layers],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Weights:
        return cls(
            tuple(data["low"]),
            tuple(data["high"]),
            tuple(data["mean"]),
            tuple(data["std"]),
            tuple((tuple(map(tuple, w)), tuple(b)) for w, b in data["layers"]),
        )

    @functools.cached_property
    def _arrays(self) -> tuple[Any, Any, Any, Any, list[tuple[Any, Any]]]:
        import numpy as np

        return (
            np.asarray(self.low, dtype=np.float32),
            np.asarray(self.high, dtype=np.float32),
            np.asarray(self.mean, dtype=np.float32),
            np.asarray(self.std, dtype=np.float32),
            [
                (np.asarray(w, dtype=np.float32), np.asarray(b, dtype=np.float32))
                for w, b in self.layers
            ],
        )

    def logits(self, X: Any) -> FloatArray:
        """The class-1 logits of rows ``X`` (n, d), in float32 as the program computes them.

        The same operations in the same order as the program; matrix products
        may round the last bits differently from torch's kernels, which only
        matters for a row whose logit is within about 1e-6 of zero.
        """
        import numpy as np

        low, high, mean, std, layers = self._arrays
        held = np.maximum(np.minimum(np.asarray(X, dtype=np.float32), high), low)
        h = (held - mean) / std
        for index, (weight, bias) in enumerate(layers):
            h = h @ weight.T + bias
            if index < len(layers) - 1:
                h = np.maximum(h, np.float32(0.0))
        logits: FloatArray = h[:, 0].astype(np.float64)
        return logits

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
