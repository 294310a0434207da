"""pytest-clinaudit: grade AI agents performing clinical AI security audits.

The pytest plugin (``pytest --submission report.json --variant wdbc-hard``)
lives in :mod:`pytest_clinaudit.plugin`; the reference auditor in
:mod:`pytest_clinaudit.reference`; the ``clinaudit`` command in
:mod:`pytest_clinaudit.cli`. Importing this package imports nothing heavy.
"""

import os as _os

__version__ = "0.1.0"

# The repository keeps reference/ and variants/ at its top level, and an install
# maps them to pytest_clinaudit.reference and pytest_clinaudit.variants. When this
# package is imported straight from a checkout (``python -m pytest`` puts the
# checkout first on sys.path), let the package find them beside itself too.
_here = _os.path.dirname(__file__)
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "reference")) and _os.path.isfile(
    _os.path.join(_root, "reference", "__init__.py")
):
    __path__.append(_root)
