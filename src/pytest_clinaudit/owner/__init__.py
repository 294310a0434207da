"""Own-model audits: a model owner's model and data, audited with numbers they can trust.

``inputs`` checks the model and data files before any attack (one-line errors);
``audit`` runs the own-data profile of :mod:`pytest_clinaudit.reference.review.own_data`
(or, with ``--params``, the task's exact semantics) and assembles the report;
``summary`` is what the terminal shows: components with their intervals, the
verdict's stability, the diagnostics and the caveats a reviewer must read;
``page`` fills the audit page of :mod:`pytest_clinaudit.pages` from the report.
"""
