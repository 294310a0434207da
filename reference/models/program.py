"""The ``model.pt2`` an agent receives: a trained MLP exported with ``torch.export``."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .determinism import one_thread
from .mlp import MLPRecipe, TrainingRecord
from .torch_adapter import TorchClassifier
from .training import train_mlp

if TYPE_CHECKING:
    from ..data import Dataset


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
