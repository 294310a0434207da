"""pytest-clinaudit: grade AI agents performing clinical AI security audits.

The package is laid out by capability (docs/architecture.md draws it):

``plugin``
    The pytest plugin, ``pytest --submission report.json --variant wdbc-hard``:
    glue between pytest and :mod:`~pytest_clinaudit.grading`.
``api``, ``hookspecs``
    What graders extend: checks and hooks.
``grading``
    The grading core: one submission in, one grade out.
``catalog``
    What a submission is graded against: variants, references, their cache.
``reference``
    The reference auditor: the four attacks and the SPS, pure numeric code.
``batch``
    Grading many submissions, and paper-style tables and plots of them.
``adapters``
    Workspaces, ``task.md``, METR and Inspect: the task in other harnesses.
``cli``
    The ``clinaudit`` command.

Importing this package imports nothing heavy.
"""

__version__ = "0.1.0"
