"""MLP recipes: what the variant files say, validation, determinism, DP accounting."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import nn_helpers
import numpy as np
import pytest
import torch

from pytest_clinaudit.catalog.variants import VariantError, load_variant
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.models.mlp import (
    AdversarialTraining,
    DifferentialPrivacy,
    MLPRecipe,
)
from pytest_clinaudit.reference.models.program import build_mlp
from pytest_clinaudit.reference.models.recipes import RecipeError, build_model
from pytest_clinaudit.reference.models.training import train_mlp, training_rows

PLAIN = {
    "estimator": "mlp",
    "hidden": (4,),
    "activation": "relu",
    "optimizer": "sgd",
    "lr": 0.1,
    "weight_decay": 0.0,
    "class_weight": "none",
    "epochs": 3,
    "batch_size": 4,
    "seed": 0,
}


def _tiny(n: int = 20) -> Dataset:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] > 0).astype(int)
    return Dataset("tiny", "label", ("a", "b", "c"), X, y, X, y)


# ------------------------------------------------------------ variant files


def test_the_variant_files_spell_out_each_defence_and_nothing_else() -> None:
    for base in ("wdbc-mlp", "icu-synth-mlp"):
        plain, pgd, dp = (nn_helpers.recipe(f"{base}{s}") for s in ("", "-pgd", "-dp"))
        assert plain.adversarial_training is None
        assert plain.differential_privacy is None
        assert pgd.adversarial_training is not None
        assert dp.differential_privacy is not None
        # Same architecture and rows: the defence is what differs.
        assert {plain.hidden, pgd.hidden, dp.hidden} == {plain.hidden}
        assert {plain.train_subset, pgd.train_subset, dp.train_subset} == {plain.train_subset}
    assert nn_helpers.recipe("icu-synth-mlp").train_subset == 2000
    assert nn_helpers.recipe("wdbc-mlp").train_subset is None


def test_every_torch_variant_is_white_box_and_clipped_in_std_units() -> None:
    for name in nn_helpers.WDBC_MLP + nn_helpers.ICU_MLP + nn_helpers.MIMIC_MLP:
        variant = nn_helpers.variant(name)
        fgsm = variant.params.fgsm
        assert variant.semantics == "sps-v1-wb"
        assert (fgsm.gradient, fgsm.epsilon_units, fgsm.clip) == ("model", "std", "train-range")
        assert fgsm.pgd_steps is not None


def test_the_overfit_icu_mlp_is_trained_on_every_member_the_attacks_query() -> None:
    variant = nn_helpers.variant("icu-synth-mlp")
    n_eval = variant.params.membership_inference.eval_cap
    X, _ = training_rows(nn_helpers.recipe("icu-synth-mlp"), nn_helpers.dataset("icu-synth-mlp"))
    assert len(X) >= n_eval


@pytest.mark.parametrize("suffix", ["", "-pgd", "-dp"])
def test_mimic_and_icu_synth_mlp_variants_differ_only_in_their_data_source(suffix: str) -> None:
    mimic, synth = (
        nn_helpers.variant(f"mimic-mlp{suffix}"),
        nn_helpers.variant(f"icu-synth-mlp{suffix}"),
    )
    assert mimic.params == synth.params
    assert mimic.model == synth.model
    assert mimic.tolerance == synth.tolerance
    assert mimic.dataset.label == synth.dataset.label


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    name = "wdbc-mlp-dp" if "noise_multiplier" in old else "wdbc-mlp-pgd"
    text = nn_helpers.variant(name).path.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "custom.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("hidden = [64, 64]", 'hidden = [64, "64"]', "model.hidden: expected an array of integers"),
        (
            "hidden = [64, 64]",
            "hidden = []",
            "model: mlp: hidden must be a non-empty array of positive widths, got ()",
        ),
        (
            "noise_multiplier = 3.0",
            "noise_multiplier = 0.0",
            "model: mlp differential_privacy: noise_multiplier must be positive, got 0.0",
        ),
        ("steps = 7", "steps = 7.5", "model.adversarial_training.steps: expected an integer"),
        (
            'gradient = "model"',
            'gradient = "surrogate"',
            "semantics: fgsm.gradient = 'surrogate' is 'sps-v1', got 'sps-v1-wb'",
        ),
        (
            'clip = "train-range"',
            'clip = "range"',
            "fgsm.clip: expected one of 'none', 'train-range'",
        ),
        ("pgd_steps = 20", "pgd_steps = 0", "fgsm.pgd_steps: must be positive"),
        ("epochs = 60", "epochs = 60\nepoch = 1", "model: unknown key 'epoch'"),
    ],
)
def test_a_bad_mlp_variant_file_names_the_key_and_what_was_expected(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    path = _edited(tmp_path, old, new)
    with pytest.raises(VariantError) as excinfo:
        load_variant(path)
    assert str(excinfo.value).startswith(f"{path}: ")
    assert message in str(excinfo.value)


def test_recipes_refuse_two_defences_and_dp_without_sgd() -> None:
    at = AdversarialTraining(0.5, 3, 0.2, True)
    dp = DifferentialPrivacy(1.0, 1.0, 1e-5, "rdp")
    with pytest.raises(RecipeError, match="choose adversarial_training or differential_privacy"):
        MLPRecipe(**PLAIN, adversarial_training=at, differential_privacy=dp)  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="differential_privacy needs optimizer = 'sgd'"):
        MLPRecipe(**{**PLAIN, "optimizer": "adam"}, differential_privacy=dp)  # type: ignore[arg-type]


def test_an_mlp_recipe_is_never_pickled_by_the_scikit_learn_builder() -> None:
    variant = nn_helpers.variant("wdbc-mlp")
    with pytest.raises(
        RecipeError, match="built by pytest_clinaudit.reference.models.program.build_mlp"
    ):
        build_model(variant.model, variant.params.fgsm.surrogate, _tiny())


# --------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", nn_helpers.WDBC_MLP)
def test_the_same_recipe_gives_the_same_artifact_bytes_twice(name: str) -> None:
    again = build_mlp(nn_helpers.recipe(name), nn_helpers.dataset(name))
    assert again.artifact.data == nn_helpers.built(name).artifact.data
    assert again.record == nn_helpers.built(name).record


def test_training_pins_its_own_threads_and_leaves_the_callers_torch_state_alone() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    state = torch.random.get_rng_state()
    try:
        again = build_mlp(nn_helpers.recipe("wdbc-mlp"), nn_helpers.dataset("wdbc-mlp"))
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.random.get_rng_state(), state)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(threads)
    assert again.artifact.sha256 == nn_helpers.built("wdbc-mlp").artifact.sha256


BUILD_IN_A_FRESH_PROCESS = """
import sys
sys.path.insert(0, {tests!r})
import nn_helpers
from pytest_clinaudit.reference.models.program import build_mlp
print(build_mlp(nn_helpers.recipe({name!r}), nn_helpers.dataset({name!r})).artifact.sha256)
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wdbc-mlp-pgd", "wdbc-mlp-dp"])
def test_a_fresh_process_builds_the_same_bytes(name: str) -> None:
    script = BUILD_IN_A_FRESH_PROCESS.format(tests=str(Path(__file__).parent), name=name)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == nn_helpers.built(name).artifact.sha256


# -------------------------------------------------------------- training


def test_the_program_standardises_with_the_training_mean_and_population_std() -> None:
    trained = train_mlp(nn_helpers.recipe("wdbc-mlp"), nn_helpers.dataset("wdbc-mlp"))
    X = torch.tensor(nn_helpers.dataset("wdbc-mlp").X_train, dtype=torch.float32)
    torch.testing.assert_close(trained.module.mean, X.double().mean(0).float())
    torch.testing.assert_close(trained.module.std, X.double().std(0, correction=0).float())


def test_the_dp_recipe_records_the_epsilon_opacus_accountant_gives_for_its_steps() -> None:
    from opacus.accountants import create_accountant

    recipe = nn_helpers.recipe("wdbc-mlp-dp")
    dp = recipe.differential_privacy
    assert dp is not None
    record = nn_helpers.built("wdbc-mlp-dp").record
    n = nn_helpers.dataset("wdbc-mlp-dp").n_train
    sample_rate = 1 / math.ceil(n / recipe.batch_size)  # Opacus: 1 / batches per epoch
    assert record.steps == recipe.epochs * math.ceil(n / recipe.batch_size)
    accountant = create_accountant(mechanism=dp.accountant)
    accountant.history = [(dp.noise_multiplier, sample_rate, record.steps)]
    assert record.epsilon == pytest.approx(accountant.get_epsilon(dp.delta), rel=1e-9)
    assert (record.delta, record.accountant) == (dp.delta, dp.accountant)


def test_an_empty_poisson_batch_still_counts_as_a_private_step() -> None:
    # Batches of expected size 1 out of 20 rows: about a third are empty.
    recipe = MLPRecipe(
        **{**PLAIN, "batch_size": 1},  # type: ignore[arg-type]
        differential_privacy=DifferentialPrivacy(1.0, 1.0, 1e-3, "rdp"),
    )
    trained = train_mlp(recipe, _tiny())
    assert trained.record.steps == 3 * 20
    assert math.isfinite(trained.record.final_loss)
    assert all(torch.isfinite(p).all() for p in trained.module.parameters())


def test_balanced_class_weight_needs_both_classes() -> None:
    data = _tiny()
    one_class = Dataset(
        "t", "label", data.feature_names, data.X_train, np.zeros(20, int), data.X_test, data.y_test
    )
    with pytest.raises(RecipeError, match="needs both classes"):
        train_mlp(MLPRecipe(**{**PLAIN, "class_weight": "balanced"}), one_class)  # type: ignore[arg-type]
