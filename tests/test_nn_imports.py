"""torch stays optional: nothing imports it until a torch model is trained or loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
import pytest_clinaudit.reference.attacks.audit
import pytest_clinaudit.reference.models.mlp
import pytest_clinaudit.reference.models.program
import pytest_clinaudit.reference.models.training
import pytest_clinaudit.reference.attacks.privacy
import pytest_clinaudit.reference.attacks.whitebox
from pytest_clinaudit.catalog.variants import default_catalog

catalog = default_catalog()
torch_variants = [n for n in catalog.names() if catalog.find(n).semantics == "sps-v1-wb2"]
print(json.dumps({
    "torch_variants": torch_variants,
    "imported": sorted({m.split(".")[0] for m in sys.modules} & {"torch", "opacus"}),
}))
"""


def test_loading_every_variant_and_importing_the_torch_modules_imports_no_torch(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert len(result["torch_variants"]) == 16  # wdbc, icu-synth, mimic, flchain: 4 each
    assert result["imported"] == []
