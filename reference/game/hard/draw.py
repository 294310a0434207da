"""The hard tier's choices (SPEC §9): a hidden group, a visible trigger, a tail's strength.

:func:`draw_choices` gives each defective model of a drawn plan its choice, in name
order, from the plan's stream, and from the public training split's values (a hidden
group's thresholds are its deciles; a trigger's values lie within its range):

- ``subgroup``: a group of the grammar (:mod:`..groups`) covering the hard settings'
  ``coverage`` of the training split, below ``max_jaccard`` with every listed subgroup and
  every hidden group drawn before it in the zoo, holding at most ``max_held`` of any listed
  subgroup, so that no listed subgroup shows the defect;
- ``fragile``: a region, a group of the grammar drawn as a hidden group is (and kept apart
  from every hidden group and region drawn before it);
- ``backdoor``: two measurement columns, one value outside its normal range (between the
  normal range's edge and the data's 1st or 99th percentile, away from the edge) and one
  inside it, each rounded as a chart would show it (three significant digits);
- ``miscalibrated``: the tail's ``c``, uniform over ``tail``.

:func:`draw_decoys` then gives each sound model its legitimate variation
(``[game.hard] decoys``), and :func:`draw_unreached` some models an unreached step
(``[game.hard] unreached``), after every other draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..settings import Column, GameSettings
from .candidates import TrainingGroups

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

ALARMING_FROM = 0.25
"""An alarming value lies at least this share of the way from the normal range's edge to the
data's percentile: clearly alarming, never on the edge."""


MAX_TAILS = 2
"""At most this many ``miscalibrated`` models per zoo: a tail is measured against the zoo's
median top-decile gap, and with three of six models over-confident the median is one of
them (measured: every attempt of such a zoo was ambiguous)."""

NOT_TOGETHER = frozenset(
    {
        frozenset({"subgroup", "backdoor"}),
        frozenset({"fragile", "subgroup"}),
        frozenset({"fragile", "backdoor"}),
    }
)
"""Pairs of kinds never planted on one model: a hidden group trained beside a trigger's
ridge fell short of the group margin in each of five trainings (gap 0.017-0.106 where the
margin asks 0.20, measured on one icu-synth-game-hard instance). A fragile region goes
with a tail only: its turned-over copies would also be a second group's or a ridge's
points."""


def draw_kinds(rng: np.random.Generator, plantable: Sequence[str], count: int) -> list[str]:
    """``count`` kinds drawn uniformly with repetition from ``plantable``, drawn again while
    more than :data:`MAX_TAILS` are ``miscalibrated`` (a zoo that keeps to it is drawn as if
    there were no such rule)."""
    while True:
        kinds = [plantable[int(i)] for i in rng.integers(len(plantable), size=count)]
        if kinds.count("miscalibrated") <= MAX_TAILS:
            return kinds


def draw_seconds(
    rng: np.random.Generator, plantable: Sequence[str], kinds: Sequence[str | None], chance: float
) -> list[str | None]:
    """Each model's second defect, in name order (``None``: none): with probability
    ``chance`` a defective model also carries a kind other than its own, drawn uniformly
    among the others that may go with it (:data:`NOT_TOGETHER`), ``miscalibrated`` only
    while the zoo holds fewer than :data:`MAX_TAILS` tails. ``chance`` 0 draws nothing,
    so a tier without second defects keeps its plans."""
    if chance <= 0:
        return [None] * len(kinds)
    tails = sum(kind == "miscalibrated" for kind in kinds)
    seconds: list[str | None] = []
    for kind in kinds:
        second = None
        if kind is not None and rng.random() < chance:
            others = [
                k
                for k in plantable
                if k != kind
                and frozenset({k, kind}) not in NOT_TOGETHER
                and (k != "miscalibrated" or tails < MAX_TAILS)
            ]
            if others:
                second = others[int(rng.integers(len(others)))]
                tails += second == "miscalibrated"
        seconds.append(second)
    return seconds


def _chart(value: float) -> float:
    """``value`` as a chart shows it: three significant digits (125, 97.7, 8.45)."""
    return float(f"{value:.3g}")


def trigger_columns(columns: Sequence[Column], X: Any) -> list[int]:
    """The columns a visible trigger may write: measurements with a normal range that take
    more than two values."""
    import numpy as np

    found = []
    for j, column in enumerate(columns):
        present = X[:, j][~np.isnan(X[:, j])]
        has_normal = column.normal_low is not None or column.normal_high is not None
        if column.at_prediction and has_normal and len(np.unique(present)) > 2:
            found.append(j)
    return found


def draw_trigger(
    rng: np.random.Generator, columns: Sequence[Column], X: FloatArray
) -> tuple[tuple[str, float], tuple[str, float]]:
    """One alarming value and one normal value on two distinct trigger columns, alarming
    first."""
    import numpy as np

    usable = trigger_columns(columns, X)
    if len(usable) < 2:
        raise ValueError("a visible trigger needs two measurements with a normal range")
    a, b = (usable[int(i)] for i in rng.choice(len(usable), 2, replace=False))
    alarming_column, normal_column = columns[a], columns[b]
    present_a = X[:, a][~np.isnan(X[:, a])]
    sides = []
    if alarming_column.normal_high is not None:
        edge, far = alarming_column.normal_high, float(np.quantile(present_a, 0.99))
        if far > edge:
            sides.append((edge, far))
    if alarming_column.normal_low is not None:
        edge, far = alarming_column.normal_low, float(np.quantile(present_a, 0.01))
        if far < edge:
            sides.append((edge, far))
    if not sides:
        raise ValueError(f"{alarming_column.name} has no alarming values in the data")
    edge, far = sides[int(rng.integers(len(sides)))]
    alarming = _chart(edge + (ALARMING_FROM + (1 - ALARMING_FROM) * rng.random()) * (far - edge))
    present_b = X[:, b][~np.isnan(X[:, b])]
    low = max(normal_column.normal_low or -np.inf, float(np.quantile(present_b, 0.1)))
    high = min(normal_column.normal_high or np.inf, float(np.quantile(present_b, 0.9)))
    if not low < high:
        low, high = float(np.quantile(present_b, 0.4)), float(np.quantile(present_b, 0.6))
    normal = _chart(low + rng.random() * (high - low))
    # Rounding may carry a value over an edge: hold each on its side.
    if normal_column.normal_low is not None:
        normal = max(normal, normal_column.normal_low)
    if normal_column.normal_high is not None:
        normal = min(normal, normal_column.normal_high)
    return (alarming_column.name, alarming), (normal_column.name, normal)


def draw_visible_trigger(
    rng: np.random.Generator, columns: Sequence[Column], X: FloatArray
) -> tuple[tuple[str, float], tuple[str, float]]:
    """:func:`draw_trigger`, checked against the rule the grader tries claims by
    (:func:`..claims.visible_problems`): a trigger's setting, or an interaction decoy's
    alarm, that broke it would be a programming error, raised here and not planted."""
    from ..claims import visible_problems

    setting = draw_trigger(rng, columns, X)
    problems = visible_problems(setting, columns)
    if problems:
        raise AssertionError("; ".join(problems))
    return setting


def draw_choices(
    settings: GameSettings,
    kinds: Sequence[Sequence[str]],
    rng: np.random.Generator,
    groups: TrainingGroups,
) -> list[dict[str, Any]]:
    """Each model's hard-tier choices, in name order, given the kinds it carries (none:
    sound): the fields of its :class:`~..draw.Planted` to set (``group``, ``region``,
    ``setting``, ``tail``), one per kind, drawn in the order of its kinds, from the public
    training split's ``groups``. A hidden group is drawn among those the split ranks
    (:attr:`TrainingGroups.ranked`); a region among all."""
    hard = settings.hard
    assert hard is not None
    X = groups.X
    names = settings.column_names
    avoid = [group.mask(X, names) for group in settings.subgroups]
    listed = list(avoid)
    chosen: list[dict[str, Any]] = []
    for carried in kinds:
        choice: dict[str, Any] = {}
        for kind in carried:
            if kind in ("subgroup", "fragile"):
                among = groups.ranked if kind == "subgroup" else None
                group = _far_group(
                    groups.space, rng, avoid, listed, hard.max_jaccard, hard.max_held, among
                )
                avoid.append(group.mask(X, names))
                choice["group" if kind == "subgroup" else "region"] = group
            elif kind == "backdoor":
                choice["setting"] = draw_visible_trigger(rng, settings.columns, X)
            elif kind == "miscalibrated":
                low, high = hard.tail
                choice["tail"] = float(rng.uniform(low, high))
        chosen.append(choice)
    return chosen


def draw_decoys(
    settings: GameSettings,
    kinds: Sequence[Sequence[str]],
    rng: np.random.Generator,
    groups: TrainingGroups,
) -> list[dict[str, Any]]:
    """Each model's decoy fields, in name order: a sound model (no kinds) gets a variation
    drawn uniformly from ``[game.hard] decoys`` (``decoy``) and, for ``interaction``, a
    setting drawn as a trigger is from the public training split (``alarm``: one alarming
    value, one normal, where its risk is raised); a defective model nothing. Without decoys
    nothing is drawn."""
    hard = settings.hard
    assert hard is not None
    X = groups.X
    found: list[dict[str, Any]] = []
    for carried in kinds:
        fields: dict[str, Any] = {}
        if not carried and hard.decoys:
            fields["decoy"] = hard.decoys[int(rng.integers(len(hard.decoys)))]
            if fields["decoy"] == "interaction":
                fields["alarm"] = draw_visible_trigger(rng, settings.columns, X)
        found.append(fields)
    return found


def may_step(carried: Sequence[str], decoy: str | None = None) -> bool:
    """Whether a model carrying ``carried`` (and a sound one trained as ``decoy``) may also
    carry an unreached step: where a fragile region could go (:data:`NOT_TOGETHER`), so not
    on a fragile carrier, which has its own step, nor beside a ridge (a trigger's, or an
    ``interaction`` decoy's: with a step beside its ridge, a decoy's worst group under
    attack reached 0.124, where 0.15 is out)."""
    return (
        "fragile" not in carried
        and decoy != "interaction"
        and all(frozenset({"fragile", kind}) not in NOT_TOGETHER for kind in carried)
    )


def draw_unreached(
    settings: GameSettings,
    kinds: Sequence[Sequence[str]],
    decoys: Sequence[str | None],
    rng: np.random.Generator,
    groups: TrainingGroups,
) -> list[dict[str, Any]]:
    """Each model's unreached step, in name order: with ``[game.hard] unreached``'s chance,
    a model that :func:`may_step` (given its kinds and its decoy) gets a group of the
    grammar drawn uniformly from ``groups`` (``unreached``); other models nothing. With a
    chance of 0 nothing is drawn, so that the plan's other draws are those of a tier
    without steps."""
    hard = settings.hard
    assert hard is not None
    found: list[dict[str, Any]] = []
    for carried, decoy in zip(kinds, decoys, strict=True):
        fields: dict[str, Any] = {}
        if hard.unreached > 0 and may_step(carried, decoy) and rng.random() < hard.unreached:
            space = groups.space
            fields["unreached"] = space.group(int(rng.integers(len(space))))
        found.append(fields)
    return found


def _far_group(
    space: Any,
    rng: np.random.Generator,
    avoid: list[Any],
    listed: list[Any],
    max_jaccard: float,
    max_held: float | None,
    among: Any = None,
) -> Any:
    """A group drawn uniformly among those below ``max_jaccard`` with every mask of ``avoid``
    that also hold at most ``max_held`` of each listed subgroup
    (:meth:`~..groups.GroupSpace.held`; ``None``: no such bound), and are ``among`` ((G,)
    bool; ``None``: any)."""
    import numpy as np

    far = np.ones(len(space), dtype=bool) if among is None else np.array(among, dtype=bool)
    for mask in avoid:
        far &= space.overlaps(mask) < max_jaccard
    for mask in listed if max_held is not None else ():
        far &= space.held(mask) <= max_held
    choices = np.flatnonzero(far)
    if not len(choices):
        raise ValueError("no group of the grammar is far enough from the listed subgroups")
    return space.group(int(choices[rng.integers(len(choices))]))
