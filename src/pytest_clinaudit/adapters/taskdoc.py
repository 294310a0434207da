"""``task.md``: the instructions an agent receives, generated from the variant.

Every number comes from the variant's records, so the instructions cannot
drift from what is graded. The document ends with the same parameters as a
machine-readable TOML block, which the scripted agent (and a careful human)
can read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_clinaudit.reference.attacks.params import COMPONENTS, as_dict

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.variants import Variant
    from pytest_clinaudit.reference.attacks.params import FGSMParams
    from pytest_clinaudit.reference.data import Dataset

REPORT_NAME = "report.json"
MODEL_NAME = "model.pkl"
TORCH_MODEL_NAME = "model.pt2"
TRAIN_NAME = "train.csv"
TEST_NAME = "test.csv"
PARAMETERS_FENCE = "```toml clinaudit-parameters"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _toml_tables(prefix: str, table: dict[str, Any]) -> list[str]:
    scalars = [f"{k} = {_toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    lines = [f"[{prefix}]", *scalars, ""]
    for key, value in table.items():
        if isinstance(value, dict):
            lines += _toml_tables(f"{prefix}.{key}", value)
    return lines


def parameters_toml(variant: Variant) -> str:
    """The attack parameters, weights and verdict thresholds as TOML tables."""
    params = as_dict(variant.params)
    sections = {
        "fgsm": params["fgsm"],
        "membership_inference": params["membership_inference"],
        "calibration": params["calibration"],
        "boundary": params["boundary"],
        "weights": params["weights"],
        "verdict": params["verdict"],
    }
    lines = [f'variant = "{variant.name}"', f'label = "{variant.dataset.label}"', ""]
    for name, table in sections.items():
        lines += _toml_tables(name, table)
    return "\n".join(lines).rstrip() + "\n"


def model_name(variant: Variant) -> str:
    """The model's file in the workspace: a pickle, or a torch exported program (SPEC §7.1)."""
    return TORCH_MODEL_NAME if variant.is_torch else MODEL_NAME


def _g(value: float) -> str:
    """A number as a person writes it, exactly: 0.15, 1e-10, 12.0 -> 12."""
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def render(variant: Variant, data: Dataset) -> str:
    """The full ``task.md`` for a variant and its data."""
    p = variant.params
    f, m, c, b, w, v = (
        p.fgsm,
        p.membership_inference,
        p.calibration,
        p.boundary,
        p.weights,
        p.verdict,
    )
    model_file = model_name(variant)
    files, notation = _model_text(model_file)
    s = f.surrogate
    scaled_space = "scaled" if s.scaler else "raw"
    surrogate = (
        f"`StandardScaler` followed by `LogisticRegression(C={_g(s.C)}, max_iter={s.max_iter}, "
        f"class_weight={'None' if s.class_weight == 'none' else repr(s.class_weight)}, "
        f"random_state={s.random_state})`"
        if s.scaler
        else f"`LogisticRegression(C={_g(s.C)}, max_iter={s.max_iter}, "
        f"class_weight={'None' if s.class_weight == 'none' else repr(s.class_weight)}, "
        f"random_state={s.random_state})` with no scaler"
    )
    shadow_weight = "None" if m.shadow_class_weight == "none" else repr(m.shadow_class_weight)
    features = ", ".join(f"`{name}`" for name in data.feature_names)
    weights = dict(zip(COMPONENTS, w.as_tuple(), strict=True))
    formula = " + ".join(f"{_g(weights[name])} * {name}" for name in COMPONENTS)
    fgsm_steps = (
        _white_box_fgsm_text(variant)
        if f.white_box
        else (
            f"""1. Fit the surrogate on all training rows: {surrogate}.
   Let `W` be the logistic regression's coefficient row (in its own,
   {scaled_space} feature space).
2. With a fresh generator with seed {f.seed}, draw `min({f.n_samples}, n_test)` distinct
   test row positions with `choice(n_test, size, replace=False)`; take those rows.
3. Perturb every drawn row in the raw feature units of the CSV. {_budget(f)}:
   a row labelled 1 becomes `x - e * sign(W)`, a row labelled 0 becomes
   `x + e * sign(W)`.{_clip(f)}
4. `drop = max(0, AUROC(y, p(X_drawn)) - AUROC(y, p(X_perturbed)))`, with
   `sklearn.metrics.roc_auc_score`. The component is `max(0, 1 - drop)`.
   If the drawn rows hold only one class, the component is {_g(f.single_class_score)}."""
        )
    )
    return f"""# Clinical AI security audit ({variant.name})

You are auditing a pre-trained clinical classifier before deployment. Measure
how it holds up against four attacks, combine the results into a Security
Posture Score (SPS) with a verdict, and write a JSON report. Follow the steps
below exactly: the grader recomputes every number with these definitions.

## Your files (this directory)

{files}
- `{TRAIN_NAME}` ({data.n_train} rows) and `{TEST_NAME}` ({data.n_test} rows): the first
  column `{data.label}` is the label (1 = the adverse outcome, 0 = not), then
  {len(data.feature_names)} feature columns in the model's input order: {features}.
  Feed the features to the model exactly as they are in the files.

{notation}, and "a fresh generator with seed k" is
`numpy.random.RandomState(k)`, created anew at the start of the step that uses it.
Rows keep the order they have in the files.

## 1. FGSM robustness (weight {_g(w.fgsm_robustness)})

{fgsm_steps.rstrip()}

## 2. Membership-inference resistance (weight {_g(w.membership_inference_resistance)})

1. The pool is the first `n_pool = min({m.pool_cap}, n_train)` training rows.
2. Create one fresh generator with seed {m.seed} and use it for all {m.rounds} rounds.
   In round i (i = 0 .. {m.rounds - 1}), mark `int({_g(m.in_fraction)} * n_pool)` pool positions as
   members with `choice(n_pool, that many, replace=False)`; all other pool rows are
   non-members. Keep both groups in pool order (use a boolean mask).
   Fit `RandomForestClassifier(n_estimators={m.shadow_n_estimators}, max_depth={m.shadow_max_depth},
   class_weight={shadow_weight}, random_state={m.shadow_seed} + i)` on the member rows and
   their labels. Its `predict_proba` rows on the members (attack label 1), then on
   the non-members (attack label 0), are that round's attack training data.
3. Fit the attack model `RandomForestClassifier(n_estimators={m.attack_n_estimators},
   random_state={m.attack_seed})` on the rows of all rounds, stacked in round order.
4. `n_eval = min({m.eval_cap}, n_train, n_test)`. Query the target model's
   `predict_proba` on the first `n_eval` training rows (members, truth 1) and
   the first `n_eval` test rows (non-members, truth 0).
5. The attack says "member" when its `predict_proba(...)[:, 1] >= {_g(m.threshold)}`.
   With `accuracy` its accuracy on those `2 * n_eval` queries, the component is
   `clip(1 - 2 * (accuracy - 0.5), 0, 1)`.

## 3. Calibration (weight {_g(w.calibration_ece)})

1. `prob = p(X_test)`. Compute `frac_pos, mean_pred =
   sklearn.calibration.calibration_curve(y_test, prob, n_bins={c.n_bins}, strategy="uniform")`
   (it leaves out empty bins).
2. Count test rows per bin index k = 0 .. {c.n_bins - 1} over the half-open intervals
   `[edges[k], edges[k + 1])` with `edges = numpy.linspace(0, 1, {c.n_bins + 1})`, then
   keep only the first `len(frac_pos)` counts; `total` is their sum.
3. `ece = sum over j of counts[j] / total * |frac_pos[j] - mean_pred[j]|` (0 when
   `total` is 0). The component is `max(0, 1 - {_g(c.ece_scale)} * ece)`.
   Do not "fix" the pairing of counts and bins: this definition is what is graded.

## 4. Boundary-attack resistance (weight {_g(w.boundary_attack_resistance)})

1. With a fresh generator with seed {b.seed}, draw `min({b.n_samples}, n_test)` distinct
   test row positions with `choice(n_test, size, replace=False)`.
2. For each drawn row `x`, let `o = pred(x)`. Its target is the first test row,
   in file order, whose prediction differs from `o`. If there is none, the row
   counts {b.max_steps} steps.
3. Walk: start at `cur = x`. For step = 1 .. {b.max_steps}: `d = target - cur`; if
   `numpy.linalg.norm(d) < {_g(b.min_norm)}` stop and count {b.max_steps}; otherwise
   `cand = cur + {_g(b.step_size)} * d / numpy.linalg.norm(d)`; if `pred(cand) != o`,
   count `step` and stop; else `cur = cand`. No flip within {b.max_steps} steps
   counts {b.max_steps}.
4. The component is `min(1, mean(steps) / {b.max_steps})`. The row labels are not used.

## Security Posture Score and verdict

    SPS = 100 * ({formula})

computed from the unrounded components. The verdict applies to the SPS rounded
to 2 decimals: at least {_g(v.production)} is `PRODUCTION`, at least {_g(v.conditional)} is
`CONDITIONAL`, anything lower is `NOT RECOMMENDED`.

## Your report

Write `{REPORT_NAME}` in this directory: one JSON object, numbers as JSON numbers
(not strings), SPS rounded to 2 decimals, components rounded to 4:

```json
{{"sps": 57.07,
 "components": {{"fgsm_robustness": 0.0043, "membership_inference_resistance": 1.0,
                "calibration_ece": 0.6219, "boundary_attack_resistance": 0.9738}},
 "verdict": "NOT RECOMMENDED"}}
```

(The numbers above only show the format.) You may add a `details` object with
your intermediate values: `auroc_clean`, `auroc_adversarial`, `mi_accuracy`,
`ece`, `mean_steps_to_flip`. If you add them, they must agree with your components.

## Parameters

The same parameters, machine-readable:

{PARAMETERS_FENCE}
{parameters_toml(variant)}```
"""


def _model_text(model_file: str) -> tuple[str, str]:
    """(the model's bullet in "Your files", the notation of p and pred) for its kind."""
    if model_file == TORCH_MODEL_NAME:
        files = f"""- `{model_file}`: the model, a torch exported program. Load it with torch alone:
  `f = torch.export.load("{model_file}").module()`. `f` maps a float32 tensor of
  shape (n, d) of raw features, in the files' column order, any n >= 1, to a
  float32 tensor of shape (n,): the logit of class 1 (standardisation is inside
  the program). Do not retrain, rescale or wrap it."""
        notation = """Notation: `p(X)` is
`torch.sigmoid(f(torch.as_tensor(X, dtype=torch.float32))).double().numpy()` and
`pred(X)` is `(f(torch.as_tensor(X, dtype=torch.float32)) > 0).long().numpy()`,
both under `torch.no_grad()`"""
        return files, notation
    files = f"""- `{model_file}`: the model, a pickled scikit-learn-compatible binary classifier.
  Load it with `pickle.load`; use its `predict_proba` and `predict` methods and
  do not retrain, rescale or wrap it."""
    notation = """Notation: `p(X)` is `model.predict_proba(X)[:, 1]`, `pred(X)` is
`model.predict(X)`"""
    return files, notation


def _budget(f: FGSMParams) -> str:
    """How far each feature moves: ``e``, per feature."""
    if f.in_std_units:
        return (
            f"The budget of feature j is `e_j = {_g(f.epsilon)} * s_j`, with `s_j` the population "
            "standard deviation (ddof=0) of feature j over all training rows"
        )
    return f"The budget is `e = {_g(f.epsilon)}` for every feature"


def _clip(f: FGSMParams) -> str:
    if not f.clipped:
        return ""
    return "\n   Then clip each feature to its [min, max] over the training rows."


def _white_box_fgsm_text(variant: Variant) -> str:
    """FGSM through the model's own logit gradient (SPEC §7.2, "sps-v1-wb2")."""
    f = variant.params.fgsm
    return f"""1. {_budget(f)}.
2. With a fresh generator with seed {f.seed}, draw `min({f.n_samples}, n_test)` distinct
   test row positions with `choice(n_test, size, replace=False)`; take those rows
   `X_drawn` and their labels `y_drawn`.
3. Take the gradient of each drawn row's own logit:
   `x = torch.tensor(X_drawn, dtype=torch.float32, requires_grad=True)`,
   `g = torch.autograd.grad(f(x).sum(), x)[0]`.
4. The direction of each row is `d = (1 - 2 * y_drawn) * sign(g)`: a row labelled 1
   moves down its logit, a row labelled 0 up. (This is the sign of the loss
   gradient in exact arithmetic; do not take the loss's float32 gradient instead,
   which is exactly 0 wherever the sigmoid rounds to 1.)
5. In float64 NumPy: `X_perturbed = X_drawn + e * d` (a zero gradient component
   moves nothing).{_clip(f)}
6. `drop = max(0, AUROC(y, p(X_drawn)) - AUROC(y, p(X_perturbed)))`, with
   `sklearn.metrics.roc_auc_score`. The component is `max(0, 1 - drop)`.
   If the drawn rows hold only one class, the component is {_g(f.single_class_score)}.
"""


def read_parameters(text: str) -> dict[str, Any]:
    """The parameter block of a ``task.md`` as a dictionary."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    start = text.index(PARAMETERS_FENCE) + len(PARAMETERS_FENCE)
    end = text.index("```", start)
    parameters: dict[str, Any] = tomllib.loads(text[start:end])
    return parameters
