"""The adapter of a torch exported program (SPEC §7.1): logits, probabilities, gradients."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .determinism import one_thread

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


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

    def __init__(self, module: Any, *, input_shape: tuple[int | None, ...] | None = None) -> None:
        self.module = module
        self.input_shape = input_shape
        """The exported input's shape, None for a dynamic dimension (None: not known)."""
        self.positive_output = 1
        """Of a program with two outputs per row, the positive class's (the other is the
        negative class's); the class-1 logit is their difference."""
        self.output_width: int | None = None
        """What the program returned per row on its last call: None for shape (n,), else k."""

    @classmethod
    def from_bytes(cls, data: bytes) -> TorchClassifier:
        import torch

        with one_thread():
            program = torch.export.load(io.BytesIO(data))
        return cls(program.module(), input_shape=_input_shape(program))

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
        """The class-1 logit of each row, from any output contract :meth:`outputs` accepts."""
        out = self.outputs(x)
        if out.ndim == 1:
            return out
        if out.shape[1] == 1:
            return out[:, 0]
        # Two logits: softmax(z)[k] = sigmoid(z[k] - z[1 - k]), so the positive class's
        # logit is the difference, and everything downstream (gradient, losses) holds.
        k = self.positive_output
        return out[:, k] - out[:, 1 - k]

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """The program's raw output for ``x``: shape (n,), (n, 1) or (n, 2), else an error.

        (n,) and (n, 1): the logit of class 1. (n, 2): the logits of the two classes,
        the positive class's at :attr:`positive_output`.
        """
        out: torch.Tensor = self.module(x)
        n = len(x)
        if out.shape == (n,):
            self.output_width = None
        elif out.ndim == 2 and out.shape[0] == n and out.shape[1] in (1, 2):
            self.output_width = int(out.shape[1])
        else:
            raise ValueError(
                f"the model returned shape {tuple(out.shape)} for {n} rows; expected the "
                "class-1 logit per row, shape (n,) or (n, 1), or two class logits, (n, 2)"
            )
        return out

    def raw_outputs(self, X: Any) -> Any:
        """The program's outputs for rows ``X`` as float64, shape (n,) or (n, k)."""
        import numpy as np
        import torch

        parts = []
        with one_thread(), torch.no_grad():
            for chunk, real in self._chunks(X):
                parts.append(self.outputs(chunk)[:real].double().numpy())
        return np.concatenate(parts)

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

    def logit_gradient(self, X: Any) -> FloatArray:
        """``d f(x) / dx`` of each row's own logit (SPEC §7.2 step 3), float64, shape (n, d).

        The gradient of the summed logits with respect to one row is that row's
        own logit gradient, so chunks (and padding rows, dropped) change nothing.
        Unlike the gradient of the float32 cross-entropy it never saturates: a
        row with ``|f| > 17`` has a sigmoid of exactly 1 in float32 and a loss
        gradient of exactly 0, but its logit gradient is the network's own.
        """
        import numpy as np
        import torch

        parts = []
        with one_thread():
            for chunk, real in self._chunks(X):
                x = chunk.clone().requires_grad_(True)
                (grad,) = torch.autograd.grad(self._logits(x).sum(), x)
                parts.append(grad[:real].double().numpy())
        if not parts:
            return np.empty((0, np.asarray(X).shape[1]))
        gradient: FloatArray = np.concatenate(parts)
        return gradient


def _input_shape(program: Any) -> tuple[int | None, ...] | None:
    """The shape of an exported program's one user input, None for each dynamic dimension."""
    try:
        names = [
            spec.arg.name
            for spec in program.graph_signature.input_specs
            if spec.kind.name == "USER_INPUT"
        ]
        if len(names) != 1:
            return None
        node = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == names[0])
        shape = node.meta["val"].shape
    except (AttributeError, KeyError, StopIteration):
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)
