"""pytest-clinaudit: grade AI agents performing clinical AI security audits.

The pytest plugin (``pytest --submission report.json --variant wdbc-hard``)
lives in :mod:`pytest_clinaudit.plugin`; the reference auditor in
:mod:`pytest_clinaudit.reference`; the ``clinaudit`` command in
:mod:`pytest_clinaudit.cli`. Importing this package imports nothing heavy.
"""

__version__ = "0.1.0"
