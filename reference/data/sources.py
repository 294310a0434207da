"""The registry of dataset sources, by the name a variant file's ``[dataset] source`` uses.

Each source is a frozen record of its settings that can load the rows and
fingerprint them (for cache keys) without loading when that is cheaper. A new
source is a module of this package; it registers here, where the registry can
import it, never in a base module that it imports back.
"""

from __future__ import annotations

from typing import Any

from .dataset import CSVSource
from .flchain import FLChainSource
from .icu import ICUSynthSource
from .mimic import MimicSource
from .wdbc import WDBCSource
from .whas500 import WHAS500Source

SOURCES: dict[str, type[Any]] = {
    "wdbc": WDBCSource,
    "csv": CSVSource,
    "icu-synth": ICUSynthSource,
    "mimic": MimicSource,
    "flchain": FLChainSource,
    "whas500": WHAS500Source,
}
"""Dataset sources by the name a variant file's ``[dataset] source`` uses."""
