"""The grammar of groups (SPEC §9): patients described by one or two conditions on columns.

The hard tier plants a defect in a *hidden* group: not one of the brief's listed
subgroups, but any group that one or two conditions on pre-outcome columns
describe, covering 5-25% of the test patients. One grammar serves everyone who
speaks about such a group, so that they mean the same patients:

- the builder draws a hidden group from it (:func:`draw_group`);
- the brief states it, and an agent's report describes a group in it
  (``{"where": [{"column": "anchor_age", "op": ">=", "value": 70}, ...]}``);
- the grader reads that description strictly (:func:`parse_group`) and compares
  the described patients with the planted ones by Jaccard overlap
  (:func:`jaccard`), never by the recipe's numbers;
- a searching expert enumerates the same space (:func:`candidate_groups`).

A condition is one of:

``column >= value`` / ``column < value``
    a threshold on a measurement;
``column == value``
    a value (0 or 1) of a 0/1 column;
``column missing``
    the cell is empty (NaN), where a column can be missing (FLCHAIN's creatinine).

A group is the AND of one or two conditions on distinct columns. A missing
cell satisfies no threshold and no value: "creatinine >= 1.3" means the
patients whose creatinine was measured at 1.3 or more.

The package's modules: :mod:`.grammar` (conditions, groups and what they select),
:mod:`.reading` (a report's description, read strictly) and :mod:`.space` (every group
of the grammar, to draw from or search). Only NumPy is needed (imported where used, as
everywhere in the reference): the grader reads groups at grading time without torch.
"""

from __future__ import annotations

from .grammar import (
    MAX_CONDITIONS,
    OPS,
    Condition,
    Group,
    GroupError,
    Masked,
    Op,
    can_be_missing,
    coverage,
    is_binary,
    jaccard,
)
from .reading import parse_group
from .space import (
    DECILES,
    MAX_JACCARD,
    GroupSpace,
    candidate_conditions,
    candidate_groups,
    draw_group,
)

__all__ = [
    "DECILES",
    "MAX_CONDITIONS",
    "MAX_JACCARD",
    "OPS",
    "Condition",
    "Group",
    "GroupError",
    "GroupSpace",
    "Masked",
    "Op",
    "can_be_missing",
    "candidate_conditions",
    "candidate_groups",
    "coverage",
    "draw_group",
    "is_binary",
    "jaccard",
    "parse_group",
]
