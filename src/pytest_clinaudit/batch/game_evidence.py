"""How much a constant earns on the game's evidence (SPEC §8.7), over built instances.

Each instance's grader manifest holds its truth (which model carries which kind)
and the reference's evidence number for every model. A report that measures
nothing gives one number per kind on every instance; the best such number earns
evidence credit where it lies within the tolerance of the carrier's reference.
:func:`best_constant_share` is that best share, and :func:`evidence_table` shows
it per kind beside the references' range, against the quarter SPEC §8.7 allows
(:func:`evidence_table`, a :class:`~pytest_clinaudit.batch.table_kit.Table`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_clinaudit.batch.table_kit import Column, Table, fixed, plain
from pytest_clinaudit.catalog.instances import kinds_of
from pytest_clinaudit.reference.game.settings import EVIDENCE

BEST_CONSTANT = 0.25
"""SPEC §8.7: the best single number per kind earns evidence credit on at most this share."""


def best_constant_share(values: Iterable[float], *, tolerance: float) -> float:
    """The largest share of ``values`` that one number lies within ``tolerance`` of: the
    fullest window of width ``2 * tolerance`` over the sorted values (0 when empty)."""
    ordered = sorted(values)
    best = start = 0
    for end, value in enumerate(ordered):
        while value - ordered[start] > 2 * tolerance:
            start += 1
        best = max(best, end - start + 1)
    return best / len(ordered) if ordered else 0.0


def carrier_evidence(
    manifests: Iterable[Mapping[str, Any]], evidence: Mapping[str, str] = EVIDENCE
) -> dict[str, list[float]]:
    """Kind -> the reference's evidence number of each carrier of that kind, over the
    instances (``evidence``: kind -> its evidence key; the hard tier's is
    :data:`~pytest_clinaudit.reference.game.settings.EVIDENCE_V2`)."""
    found: dict[str, list[float]] = {kind: [] for kind in evidence}
    for manifest in manifests:
        for name, truth in manifest["truth"].items():
            for kind in kinds_of(truth):
                if kind in evidence:
                    found[kind].append(float(manifest["evidence"][name][evidence[kind]]))
    return found


def evidence_rows(
    manifests: Sequence[Mapping[str, Any]],
    tolerances: Mapping[str, float],
    evidence: Mapping[str, str] = EVIDENCE,
) -> list[dict[str, Any]]:
    """Per kind with an evidence number: how many carriers, their references' range, the
    tolerance and the best constant's share (``tolerances``: evidence key -> tolerance)."""
    rows = []
    for kind, values in carrier_evidence(manifests, evidence).items():
        key = evidence[kind]
        share = best_constant_share(values, tolerance=tolerances[key]) if values else None
        rows.append(
            {
                "kind": kind,
                "evidence": key,
                "carriers": len(values),
                "low": min(values, default=None),
                "high": max(values, default=None),
                "tolerance": tolerances[key],
                "best_constant": share,
            }
        )
    return rows


def evidence_table(
    manifests: Sequence[Mapping[str, Any]],
    tolerances: Mapping[str, float],
    evidence: Mapping[str, str] = EVIDENCE,
) -> Table:
    """:func:`evidence_rows` as a batch table (Markdown, CSV)."""

    def references(row: Mapping[str, Any]) -> str:
        return f"{fixed('low', 3)(row)}-{fixed('high', 3)(row)}"

    def share(row: Mapping[str, Any]) -> str:
        value = row["best_constant"]
        if value is None:
            return "-"
        return f"{value:.3f}" + (" (ok)" if value <= BEST_CONSTANT else " (over)")

    columns = (
        Column("kind", "kind", plain("kind")),
        Column("evidence", "evidence", lambda row: f"`{row['evidence']}`"),
        Column("carriers", "carriers", plain("carriers")),
        Column("low", "references", references),
        Column("tolerance", "tolerance", lambda row: f"± {row['tolerance']:g}"),
        Column("best_constant", "best constant's share", share),
    )
    rows = evidence_rows(manifests, tolerances, evidence)
    return Table(
        name="game_evidence",
        title="Evidence: what one number per kind earns",
        note=(
            "Per kind with an evidence number, over the instances' carriers: the share of "
            f"instances the best single number earns credit on (SPEC §8.7: at most "
            f"{BEST_CONSTANT:g})."
        ),
        keys=tuple(rows[0]) if rows else ("kind",),
        columns=columns,
        rows=tuple(rows),
    )
