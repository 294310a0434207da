"""MLP recipes: what the variant files say, validation, determinism, DP accounting."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import nn_helpers
import numpy as np
import pytest
import torch

from pytest_clinaudit.catalog.variants import VariantError, load_variant
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.models.mlp import (
    DEFENCES,
    AdversarialTraining,
    DifferentialPrivacy,
    GradientClipping,
    MLPRecipe,
    Standardisation,
)
from pytest_clinaudit.reference.models.program import build_mlp
from pytest_clinaudit.reference.models.recipes import RecipeError, build_model
from pytest_clinaudit.reference.models.training import train_mlp, training_rows

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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

DEFENCE_TABLES = {
    "": None,
    "-pgd": "adversarial_training",
    "-dp": "differential_privacy",
    "-clip": "gradient_clipping",
}


def _parsed(name: str) -> dict[str, Any]:
    document: dict[str, Any] = tomllib.loads(
        nn_helpers.variant(name).path.read_text(encoding="utf-8")
    )
    return document


@pytest.mark.parametrize("family", nn_helpers.FAMILIES)
def test_a_family_shares_one_base_recipe_and_differs_only_in_its_defence_table(
    family: str,
) -> None:
    """SPEC §7.4, read from the files themselves: everything but the name, the
    description and one defence table is the same in the four files."""
    bases = {}
    for suffix, table in DEFENCE_TABLES.items():
        document = _parsed(f"{family}{suffix}")
        present = [key for key in DEFENCES if key in document["model"]]
        assert present == ([] if table is None else [table]), (suffix, present)
        for key in ("name", "aliases", "description"):
            del document[key]
        document["model"].pop(table, None)
        bases[suffix] = document
    for suffix, base in bases.items():
        assert base == bases[""], f"{family}{suffix} differs from {family} beyond its defence"
    # The ablation is DP without the noise: the same clipping norm.
    dp, clip = (nn_helpers.recipe(f"{family}{s}") for s in ("-dp", "-clip"))
    assert dp.differential_privacy is not None
    assert clip.gradient_clipping is not None
    assert clip.gradient_clipping.max_grad_norm == dp.differential_privacy.max_grad_norm
    assert {nn_helpers.recipe(f"{family}{s}").without_defence() for s in DEFENCE_TABLES} == {
        nn_helpers.recipe(family)
    }


def test_every_torch_variant_is_white_box_wb2_with_the_strong_pgd() -> None:
    for name in nn_helpers.TORCH_VARIANTS:
        variant = nn_helpers.variant(name)
        fgsm = variant.params.fgsm
        assert variant.semantics == "sps-v1-wb2"
        assert (fgsm.gradient, fgsm.epsilon_units, fgsm.clip) == ("model", "std", "train-range")
        assert fgsm.pgd_steps is not None
        assert fgsm.pgd_steps >= 50
        assert fgsm.pgd_restarts is not None
        assert fgsm.pgd_restarts >= 5
    assert {v.name for v in nn_helpers.catalog() if v.is_torch} == set(nn_helpers.TORCH_VARIANTS)


def test_the_icu_mlps_are_trained_on_every_member_the_attacks_query() -> None:
    for name in nn_helpers.ICU_MLP:
        variant = nn_helpers.variant(name)
        n_eval = variant.params.membership_inference.eval_cap
        X, _ = training_rows(nn_helpers.recipe(name), nn_helpers.dataset(name))
        assert len(X) >= n_eval


@pytest.mark.parametrize("suffix", nn_helpers.SUFFIXES)
def test_mimic_and_icu_synth_mlp_variants_differ_only_in_their_data_source(suffix: str) -> None:
    mimic, synth = (
        nn_helpers.variant(f"mimic-mlp{suffix}"),
        nn_helpers.variant(f"icu-synth-mlp{suffix}"),
    )
    assert mimic.params == synth.params
    assert mimic.model == synth.model
    assert mimic.tolerance == synth.tolerance
    assert mimic.dataset.label == synth.dataset.label


def _published_wdbc_ranges() -> tuple[list[Decimal], list[Decimal]]:
    """The "Min" and "Max" columns of the WDBC summary statistics scikit-learn ships."""
    from sklearn.datasets import load_breast_cancer

    rows = re.findall(
        r"^[a-z ]+\([a-z ]+\):\s+([0-9.]+)\s+([0-9.]+)\s*$", load_breast_cancer().DESCR, re.M
    )
    assert len(rows) == 30
    return [Decimal(low) for low, _ in rows], [Decimal(high) for _, high in rows]


def test_the_wdbc_standardisation_is_the_published_ranges_not_the_training_rows() -> None:
    low, high = _published_wdbc_ranges()
    data = nn_helpers.dataset("wdbc-mlp")
    for name in nn_helpers.WDBC_MLP:
        public = nn_helpers.recipe(name).standardisation
        assert public is not None
        # center = (min + max) / 2 exactly; scale = (max - min) / 6 to 4 significant digits.
        assert [Decimal(repr(c)) for c in public.center] == [
            (a + b) / 2 for a, b in zip(low, high, strict=True)
        ]
        np.testing.assert_allclose(
            public.scale, [float((b - a) / 6) for a, b in zip(low, high, strict=True)], rtol=5e-4
        )
        # ... and no statistic of the training rows (they would differ).
        assert not np.allclose(public.center, data.X_train.mean(axis=0), rtol=1e-3)


def test_the_icu_standardisation_and_class_weight_are_published_constants() -> None:
    for name in nn_helpers.ICU_MLP + nn_helpers.MIMIC_MLP:
        recipe = nn_helpers.recipe(name)
        assert recipe.standardisation is not None
        assert recipe.standardisation.center == (0.0,) * 8  # published z-scored (SPEC §2)
        assert recipe.standardisation.scale == (1.0,) * 8
        assert (recipe.class_weight, recipe.prevalence) == ("prevalence", 0.1136)  # SPEC §2


FLCHAIN_PUBLIC = {
    # feature: (low, high, width / scale), the ranges the variant files cite
    "age": (50.0, 100.0, 6.0),  # the study's eligibility (50 or older) to 100 years
    "sex_male": (0.0, 1.0, 2.0),  # a 0/1 code to -1/+1
    "sample_yr": (1995.0, 2003.0, 6.0),  # the study's sampling years
    "kappa": (0.33, 1.94, 3.92),  # 95% reference interval, mg/dL (Katzmann et al. 2002)
    "lambda": (0.57, 2.63, 3.92),  # idem
    "flc_grp": (1.0, 10.0, 6.0),  # groups 1-10 by construction
    "creatinine": (0.6, 1.3, 3.92),  # adult reference interval, mg/dL
    "mgus": (0.0, 1.0, 2.0),
    "creatinine_missing": (0.0, 1.0, 2.0),
}
"""FLCHAIN's public constants: center = the middle of the range, scale = its width over
6 (a range of about 6 standard deviations, as WDBC's), over 3.92 (a 95% reference
interval is +-1.96 standard deviations) or over 2 (a 0/1 code)."""


@nn_helpers.NEEDS_SKSURV
def test_the_flchain_mlps_see_public_constants_only_and_no_training_statistic() -> None:
    """SPEC §7.4 on FLCHAIN: the program's constants come from published ranges, the CSVs
    a model is trained on are neither z-scored nor median-filled with the training rows
    (as the sps-v1 flchain variants' are), and the loss has no class weight."""
    from pytest_clinaudit.reference.data.flchain import PUBLIC_FILL, load_flchain_cohort

    data = nn_helpers.dataset("flchain-mlp")
    assert tuple(FLCHAIN_PUBLIC) == data.feature_names
    low, high, width = (np.array(v) for v in zip(*FLCHAIN_PUBLIC.values(), strict=True))
    raw = load_flchain_cohort()  # the sps-v1 preparation, for its training statistics
    for name in nn_helpers.FLCHAIN_MLP:
        recipe = nn_helpers.recipe(name)
        assert nn_helpers.variant(name).dataset.preparation == "clinical"
        assert (recipe.class_weight, recipe.prevalence) == ("none", None)
        public = recipe.standardisation
        assert public is not None
        np.testing.assert_allclose(public.center, (low + high) / 2, rtol=0, atol=1e-12)
        np.testing.assert_allclose(public.scale, (high - low) / width, rtol=5e-4)
        assert not np.allclose(public.center, raw.mean, rtol=0.05)
        assert not np.allclose(public.scale, raw.std, rtol=0.05)
    # The rows: clinical units as measured, a missing creatinine filled with the public
    # constant (not the training median of 1.0 mg/dL), the same indicator.
    j = data.feature_names.index("creatinine")
    assert PUBLIC_FILL == {"creatinine": 0.95} != raw.medians
    for X, split in ((data.X_train, raw.train), (data.X_test, raw.test)):
        missing = np.isnan(split.X[:, j])
        np.testing.assert_array_equal(X[:, -1], missing.astype(float))
        np.testing.assert_array_equal(X[missing, j], 0.95)
        np.testing.assert_array_equal(X[~missing, :-1], split.X[~missing])
    for name in ("flchain-baseline", "flchain-calibrated", "flchain-hard"):
        assert nn_helpers.variant(name).dataset.preparation is None  # z-scored, unchanged


DP_EDITS = ("noise_multiplier", "class_weight", "# ---- attacks")
"""Edits made to wdbc-mlp-dp.toml; the others to wdbc-mlp-pgd.toml."""


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    name = "wdbc-mlp-dp" if old.startswith(DP_EDITS) else "wdbc-mlp-pgd"
    text = nn_helpers.variant(name).path.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "custom.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
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
            "semantics: fgsm.gradient = 'surrogate' is 'sps-v1', got 'sps-v1-wb2'",
        ),
        (
            'semantics = "sps-v1-wb2"',
            'semantics = "sps-v1-wb"',
            "semantics: 'sps-v1-wb' is retired: it took the sign of the float32 cross-entropy "
            "gradient, which is exactly 0 where |logit| > ~17",
        ),
        (
            'clip = "train-range"',
            'clip = "range"',
            "fgsm.clip: expected one of 'none', 'train-range'",
        ),
        ("pgd_steps = 100", "pgd_steps = 20", "fgsm.pgd_steps: must be at least 50 (SPEC §7.3)"),
        ("pgd_restarts = 5", "pgd_restarts = 1", "fgsm.pgd_restarts: must be at least 5"),
        ("pgd_restarts = 5", "", "fgsm: missing key 'pgd_restarts' (white-box FGSM reports"),
        ("center = [", "center = [1.0, ", "scale must be 31 positive numbers (one per center)"),
        ("center = [", 'center = ["1", ', "model.standardisation.center: expected an array of"),
        ("epochs = 60", "epochs = 60\nepoch = 1", "model: unknown key 'epoch'"),
        (
            "# ---- attacks",
            "[model.gradient_clipping]\nmax_grad_norm = 1.0\n\n# ---- attacks",
            "model: mlp: choose one defence table, got differential_privacy and gradient_clipping",
        ),
        (
            'class_weight = "none"',
            'class_weight = "balanced"',
            "differential_privacy needs class_weight = 'none' or 'prevalence'",
        ),
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


PUBLIC = Standardisation((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), "a test's constants")


def test_recipes_refuse_two_defences() -> None:
    at = AdversarialTraining(0.5, 3, 0.2, True)
    dp = DifferentialPrivacy(1.0, 1.0, 1e-5, "rdp")
    with pytest.raises(
        RecipeError,
        match="choose one defence table, got adversarial_training and differential_privacy",
    ):
        MLPRecipe(**PLAIN, standardisation=PUBLIC, adversarial_training=at, differential_privacy=dp)  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="differential_privacy and gradient_clipping"):
        MLPRecipe(
            **PLAIN,  # type: ignore[arg-type]
            standardisation=PUBLIC,
            differential_privacy=dp,
            gradient_clipping=GradientClipping(1.0),
        )


def test_a_dp_recipe_must_take_its_standardisation_and_class_weight_from_public_constants() -> None:
    dp = DifferentialPrivacy(1.0, 1.0, 1e-5, "rdp")
    with pytest.raises(
        RecipeError, match="needs \\[model.standardisation\\] from public constants"
    ):
        MLPRecipe(**PLAIN, differential_privacy=dp)  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="'balanced' counts the private labels"):
        MLPRecipe(
            **{**PLAIN, "class_weight": "balanced"},  # type: ignore[arg-type]
            standardisation=PUBLIC,
            differential_privacy=dp,
        )
    # A published rate is fine, and only with class_weight = "prevalence".
    MLPRecipe(
        **{**PLAIN, "class_weight": "prevalence"},  # type: ignore[arg-type]
        prevalence=0.1,
        standardisation=PUBLIC,
        differential_privacy=dp,
    )
    with pytest.raises(RecipeError, match="prevalence is needed with class_weight = 'prevalence'"):
        MLPRecipe(**PLAIN, prevalence=0.1)  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="prevalence must lie in \\(0, 1\\), got 1.5"):
        MLPRecipe(**{**PLAIN, "class_weight": "prevalence"}, prevalence=1.5)  # type: ignore[arg-type]


def test_an_mlp_recipe_is_never_pickled_by_the_scikit_learn_builder() -> None:
    variant = nn_helpers.variant("wdbc-mlp")
    with pytest.raises(
        RecipeError, match="built by pytest_clinaudit.reference.models.program.build_mlp"
    ):
        build_model(variant.model, variant.params.fgsm.surrogate, _tiny())


# --------------------------------------------------------------- determinism


@pytest.mark.slow
@pytest.mark.parametrize("name", nn_helpers.WDBC_MLP)
def test_the_same_recipe_gives_the_same_artifact_bytes_twice(name: str) -> None:
    # The one deliberate second build of a variant: determinism is what is tested.
    again = build_mlp(nn_helpers.recipe(name), nn_helpers.dataset(name))
    assert again.artifact.data == nn_helpers.built(name).artifact.data
    assert again.record == nn_helpers.built(name).record


@pytest.mark.slow
def test_training_pins_its_own_threads_and_leaves_the_callers_torch_state_alone() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    state = torch.random.get_rng_state()
    try:
        again = train_mlp(_tiny_recipe(), _tiny())
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.random.get_rng_state(), state)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(threads)
    assert _weights(again.module) == _weights(train_mlp(_tiny_recipe(), _tiny()).module)


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


def _tiny_recipe(**changes: Any) -> MLPRecipe:
    return MLPRecipe(**{**PLAIN, **changes})


def _weights(module: torch.nn.Module) -> dict[str, list[float]]:
    return {k: v.flatten().tolist() for k, v in module.state_dict().items()}


def _program_tensors(name: str) -> dict[str, torch.Tensor]:
    import io

    program = torch.export.load(io.BytesIO(nn_helpers.built(name).artifact.data))
    return dict(program.module().state_dict())


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", nn_helpers.cases(nn_helpers.WDBC_MLP + nn_helpers.ICU_MLP + nn_helpers.FLCHAIN_MLP)
)
def test_the_program_holds_weights_and_the_published_constants_and_nothing_else(
    name: str,
) -> None:
    """SPEC §7.4: no statistic of the private rows in the artifact outside the accountant.

    The program's tensors are the layers' weights and biases (what DP-SGD
    trained) and two buffers, which are the recipe's public constants rounded
    to float32, bit for bit.
    """
    tensors = _program_tensors(name)
    public = nn_helpers.recipe(name).standardisation
    assert public is not None
    layers = {k for k in tensors if k.startswith("layers.")}
    assert set(tensors) - layers == {"mean", "std"}
    assert all(k.endswith((".weight", ".bias")) for k in layers)
    assert torch.equal(tensors["mean"], torch.tensor(public.center, dtype=torch.float32))
    assert torch.equal(tensors["std"], torch.tensor(public.scale, dtype=torch.float32))


@pytest.mark.slow
def test_a_dp_programs_buffers_do_not_change_with_the_private_rows() -> None:
    """Two DP trainings on different private rows: the same buffers, other weights."""
    recipe = _tiny_recipe(
        standardisation=PUBLIC,
        differential_privacy=DifferentialPrivacy(1.0, 1.0, 1e-3, "rdp"),
    )
    data = _tiny(40)
    shifted = Dataset(
        "t",
        "label",
        data.feature_names,
        data.X_train * 3 + 7,
        data.y_train,
        data.X_test,
        data.y_test,
    )
    a, b = train_mlp(recipe, data).module, train_mlp(recipe, shifted).module
    assert torch.equal(a.mean, b.mean)
    assert torch.equal(a.std, b.std)
    assert torch.equal(a.mean, torch.zeros(3))
    assert not torch.equal(a.layers[0].weight, b.layers[0].weight)


def test_without_public_constants_the_program_standardises_with_the_training_rows() -> None:
    data = _tiny(40)
    trained = train_mlp(_tiny_recipe(epochs=1), data)
    X = torch.tensor(data.X_train, dtype=torch.float32)
    torch.testing.assert_close(trained.module.mean, X.double().mean(0).float())
    torch.testing.assert_close(trained.module.std, X.double().std(0, correction=0).float())


def test_a_standardisation_for_other_features_is_refused_before_training() -> None:
    wrong = Standardisation((0.0, 0.0), (1.0, 1.0), "two features")
    with pytest.raises(RecipeError, match="2 constants per array, the data 3 features"):
        train_mlp(_tiny_recipe(standardisation=wrong), _tiny())


@pytest.mark.slow
def test_the_dp_recipe_records_the_epsilon_opacus_accountant_gives_and_what_it_covers() -> None:
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
    assert record.epsilon_covers is not None
    assert "every weight and bias" in record.epsilon_covers
    assert "no statistic of the training rows" in record.epsilon_covers


@pytest.mark.slow
def test_the_clipping_ablation_takes_dps_steps_and_claims_no_epsilon() -> None:
    dp, clip = nn_helpers.built("wdbc-mlp-dp").record, nn_helpers.built("wdbc-mlp-clip").record
    assert clip.steps == dp.steps  # the same Poisson batches
    assert (clip.epsilon, clip.delta, clip.epsilon_covers) == (None, None, None)
    assert clip.opacus_version is not None


def test_an_empty_poisson_batch_still_counts_as_a_private_step() -> None:
    # Batches of expected size 1 out of 20 rows: about a third are empty.
    recipe = _tiny_recipe(
        batch_size=1,
        standardisation=PUBLIC,
        differential_privacy=DifferentialPrivacy(1.0, 1.0, 1e-3, "rdp"),
    )
    trained = train_mlp(recipe, _tiny())
    assert trained.record.steps == 3 * 20
    assert math.isfinite(trained.record.final_loss)
    assert all(torch.isfinite(p).all() for p in trained.module.parameters())


def test_a_published_prevalence_weights_the_loss_whatever_the_labels() -> None:
    from pytest_clinaudit.reference.models.training import _pos_weight

    recipe = _tiny_recipe(class_weight="prevalence", prevalence=0.2)
    for labels in ([0, 1, 1, 1], [0, 0, 0, 1]):
        weight = _pos_weight(recipe, torch.tensor(labels, dtype=torch.float32))
        assert weight is not None
        assert float(weight) == pytest.approx(4.0)
    balanced = _pos_weight(_tiny_recipe(class_weight="balanced"), torch.tensor([0.0, 0, 0, 1]))
    assert balanced is not None
    assert float(balanced) == 3.0  # counted from the labels: never under DP


def test_balanced_class_weight_needs_both_classes() -> None:
    data = _tiny()
    one_class = Dataset(
        "t", "label", data.feature_names, data.X_train, np.zeros(20, int), data.X_test, data.y_test
    )
    with pytest.raises(RecipeError, match="needs both classes"):
        train_mlp(MLPRecipe(**{**PLAIN, "class_weight": "balanced"}), one_class)  # type: ignore[arg-type]
