"""``python -m pytest_clinaudit.cli``: the ``clinaudit`` command."""

import sys

from pytest_clinaudit.cli import main

sys.exit(main())
