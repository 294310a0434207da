"""``python -m pytest_clinaudit.adapters.searcher WORKSPACE``: the searcher's command."""

import sys

from .command import main

sys.exit(main())
