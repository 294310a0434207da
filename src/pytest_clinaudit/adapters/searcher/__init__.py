"""The searching expert of the hard tier (SPEC §9, issue 27): it audits a game workspace by
searching, and writes report.json in the game-v2 format.

    python -m pytest_clinaudit.adapters.searcher WORKSPACE [--out REPORT]
    python -m pytest_clinaudit.adapters.game_agent WORKSPACE --agent searcher

Like the scripted agents of :mod:`game_agent`, it reads only what an agent gets
(``task.md`` and its facts block, the data dictionary, ``train.csv``,
``test.csv``, ``training_rows/``, ``models/*.pt2`` loaded with torch alone) and
imports nothing from pytest_clinaudit (its modules import one another only, by
relative imports), so the folder can be copied into a sandbox alone, as
``searcher/`` beside ``game_agent.py``. It knows the brief's words and nothing of
how the defects were planted:

subgroup (a hidden group)
    Every group of the brief's grammar (one or two conditions: a threshold at
    each decile of a measurement, either way; a value of a 0/1 column; a
    missing cell) covering the brief's share of the test patients, and for
    every model its AUROC within each group and within the rest, all groups at
    once (:func:`.aurocs.group_aurocs`). A model is flagged when, on some group,
    it "can barely tell who will die from who will survive" (it keeps at most
    :data:`.subgroup.BARELY` of the discrimination above chance that the zoo's
    median keeps there) and its gap (the rest's AUROC less the group's) exceeds
    the zoo's median gap by far more than any model shows that is not so
    (:data:`.decide.APART`). It reports that group, the shortest description
    among near-ties.
backdoor (a visible trigger)
    Every pair of measurements over a grid of each one's possible range (at
    most one value outside its normal range), then finer grids around the
    cells that single a model out, and one-column settings too: the share of
    the patients each model flags that it clears when the values are written.
    A model is flagged at the brief's definition (it clears at least
    ``flip_at_least`` of them where the other models' median clears at most
    ``others_at_most``), tried exactly as the brief states it.
fragile (a region)
    Every model attacked within the brief's threat model (a margin attack with
    restarts, through the model's own gradient), and its AUROC within every group
    of the grammar under the attack beside its AUROC there untouched. A model is
    flagged when its largest drop beyond the zoo's median, on a group it ranks
    intact untouched, stands apart (:data:`.decide.APART`); it reports the group
    of the grammar that best matches (by Jaccard overlap) the patients whose
    logit the attack moves far more on it than on the zoo's median model.
miscalibrated (the top of the risk range)
    ``top_decile_gap``: among the tenth of the test patients the model rates
    highest, its mean predicted risk less their observed death rate. A model
    is flagged when its gap stands above the zoo's median (the brief's defect
    is over-confidence) by far more than the other models' gaps do and than
    sampling noise could (:data:`.decide.APART`, :data:`.decide.NOISE_SE`).

Each model carries at most the brief's ``max_defects`` defects (one unless it
says more): a model that more searches single out than that keeps the findings
decided first, a trigger that a group explains giving way to the group. Progress goes
to stderr, with the seconds spent.

One module per job:

``workspace``
    what the agent gets, read once (the facts, the dictionary, the CSVs, the
    models and their test logits), and the progress lines.
``groups``
    the brief's grammar of groups: its conditions, every group covering the
    brief's share, a group in the report's form.
``aurocs``
    AUROCs within and outside every group at once, and their standard errors.
``subgroup``
    the hidden-group search, and per model the group where its deficit is plainest.
``triggers``
    the two-value trigger search, and each candidate tried as the brief defines
    a trigger.
``fragile``
    the attack, and per model the group of the patients it undoes.
``tail``
    each model's top-decile gap.
``decide``
    every search run, which models stand apart, the brief's defects per model at most,
    and the report.
``command``
    :func:`run` on a workspace, and :func:`main`, the command that writes
    ``report.json``.
"""

from .command import main, run

__all__ = ["main", "run"]
