"""model.pt2: what an agent loads with torch alone, and the adapter the attacks call."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import nn_helpers
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_clinaudit.reference as reference_package
from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier


def _program(name: str) -> torch.nn.Module:
    module: torch.nn.Module = torch.export.load(
        io.BytesIO(nn_helpers.built(name).artifact.data)
    ).module()
    return module


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 1000])
def test_the_program_maps_n_rows_of_raw_features_to_n_float32_logits(n: int) -> None:
    f = _program("wdbc-mlp")
    with torch.no_grad():
        out = f(torch.zeros(n, 30, dtype=torch.float32))
    assert out.shape == (n,)
    assert out.dtype == torch.float32


@pytest.mark.slow
def test_the_archive_carries_no_path_of_the_checkout_that_built_it() -> None:
    data = nn_helpers.built("wdbc-mlp").artifact.data
    checkout = str(Path(reference_package.__file__).resolve().parent.parent)
    assert checkout.encode() not in data
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        graph = next(n for n in archive.namelist() if n.endswith("models/model.json"))
        assert b"stack_trace" not in archive.read(graph)
        # Fixed zip timestamps: the bytes do not depend on when the model was built.
        assert {info.date_time for info in archive.infolist()} == {(1980, 0, 0, 0, 0, 0)}


LOAD_WITH_TORCH_ALONE = """
import json, sys
import numpy as np, torch
torch.set_num_threads(1)  # SPEC §7.1: the reference evaluates with one intra-op thread
f = torch.export.load(sys.argv[1]).module()
X = np.load(sys.argv[2])
with torch.no_grad():
    p = torch.sigmoid(f(torch.as_tensor(X, dtype=torch.float32))).double().numpy()
others = sorted({m.split(".")[0] for m in sys.modules} & {"pytest_clinaudit", "sklearn", "opacus"})
print(json.dumps({"p": p.tolist(), "imported": others}))
"""


@pytest.mark.slow
def test_the_model_loads_and_runs_with_torch_alone(tmp_path: Path) -> None:
    model, rows = tmp_path / "model.pt2", tmp_path / "rows.npy"
    nn_helpers.built("wdbc-mlp").artifact.write(model)
    wdbc = nn_helpers.dataset("wdbc-mlp")
    X = np.vstack([wdbc.X_train, wdbc.X_test])[: TorchClassifier.CHUNK]
    np.save(rows, X)
    out = subprocess.run(
        [sys.executable, "-c", LOAD_WITH_TORCH_ALONE, str(model), str(rows)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    result = json.loads(out.stdout)
    # Nothing of this package (or of scikit-learn, Opacus) was needed to load and run it.
    assert result["imported"] == []
    # 512 rows in one call, on one thread, is exactly the adapter's chunk: the same
    # kernels on the same machine, so the numbers agree to the bit. (With another
    # row count the remainder rows take other kernels: last-bit differences.)
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    assert result["p"] == adapter.predict_proba(X)[:, 1].tolist()


@pytest.mark.slow
def test_the_adapter_computes_p_and_pred_as_the_spec_writes_them() -> None:
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    f = _program("wdbc-mlp")
    X = nn_helpers.dataset("wdbc-mlp").X_test
    padded = np.vstack([X, np.repeat(X[-1:], TorchClassifier.CHUNK - len(X), axis=0)])
    with torch.no_grad():
        logit = f(torch.as_tensor(padded, dtype=torch.float32))[: len(X)]
    p = torch.sigmoid(logit).double().numpy()
    proba = adapter.predict_proba(X)
    assert proba.dtype == np.float64
    np.testing.assert_array_equal(proba[:, 1], p)
    np.testing.assert_array_equal(proba[:, 0], 1.0 - p)
    np.testing.assert_array_equal(adapter.predict(X), (logit > 0).long().numpy())


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.data())
def test_a_rows_logit_does_not_depend_on_which_rows_share_its_call(data: st.DataObject) -> None:
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    wdbc = nn_helpers.dataset("wdbc-mlp")
    X = np.vstack([wdbc.X_train, wdbc.X_test])  # 569 rows: more than one 512-row chunk
    everything = adapter.logits(X)
    rows = data.draw(st.lists(st.integers(0, len(X) - 1), min_size=1, max_size=700))
    np.testing.assert_array_equal(adapter.logits(X[rows]), everything[rows])


@pytest.mark.slow
def test_row_losses_are_the_binary_cross_entropy_of_the_logits() -> None:
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    data = nn_helpers.dataset("wdbc-mlp")
    logits = torch.from_numpy(adapter.logits(data.X_test)).double()
    # torch's float64 formula loses relative accuracy on tiny losses (a few 1e-16
    # absolute); the adapter's softplus keeps it, which a ranking attack needs.
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, torch.tensor(data.y_test, dtype=torch.float64), reduction="none"
    )
    np.testing.assert_allclose(
        adapter.row_losses(data.X_test, data.y_test), expected.numpy(), rtol=1e-12, atol=1e-15
    )


@pytest.mark.slow
def test_logit_gradient_is_each_rows_own_logit_gradient() -> None:
    """SPEC §7.2 step 3: the gradient of the summed logits, row by row, in float32.

    Compared with one-row autograd calls: another batch shape may round each
    component differently in float32, by a few ulps of the largest product in its
    sum, and those products scale with the row's gradient, not with the
    component. A fixed floor of 1e-7 failed on a CI machine: a component of
    0.0307 in a row whose largest is 88.2 differed by 4.7e-7, 251 ulps of the
    component, 0.06 of one ulp of the row's largest. Hence rtol 1e-5 with an
    absolute floor of 1e-6 of the row's largest component (about eight float32 epsilons
    of it), a thousand times below NEAR_ZERO_GRADIENT (tests/test_nn_oracle.py),
    under which a component may take either sign anyway."""
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    f = _program("wdbc-mlp")
    X = nn_helpers.dataset("wdbc-mlp").X_test[:7]
    gradient = adapter.logit_gradient(X)
    assert gradient.shape == X.shape
    assert gradient.dtype == np.float64
    for i in range(len(X)):
        x = torch.tensor(X[i : i + 1], dtype=torch.float32, requires_grad=True)
        (expected,) = torch.autograd.grad(f(x).sum(), x)
        expected_row = expected[0].double().numpy()
        floor = 1e-6 * np.abs(expected_row).max()
        np.testing.assert_allclose(gradient[i], expected_row, rtol=1e-5, atol=floor)


def test_the_adapter_no_longer_offers_the_saturating_loss_gradient() -> None:
    # "sps-v1-wb" is retired: nothing may compute its float32 cross-entropy gradient.
    assert not hasattr(TorchClassifier, "loss_gradient")


@pytest.mark.slow
def test_the_adapter_says_what_shape_it_expected() -> None:
    adapter = nn_helpers.built("wdbc-mlp").artifact.load()
    with pytest.raises(ValueError, match="expected a 2-d array of rows, got shape"):
        adapter.predict(np.zeros(30))
