"""torch is the optional extra [torch]: nothing else imports it, and its absence is one line.

Each case runs in a fresh interpreter, some with torch blocked
(``sys.modules["torch"] = None`` makes ``import torch`` fail as if it were
not installed), so whatever this test process imported cannot hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grading_helpers import grading_args, reference_report, submitted, write_json

BLOCK_TORCH = "import sys; sys.modules['torch'] = None; sys.modules['opacus'] = None\n"
EXTRA = "pip install 'pytest-clinaudit[torch]'"


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_listing_the_variants_imports_no_torch(tmp_path: Path) -> None:
    result = _python(
        "import sys\n"
        "from pytest_clinaudit.cli import main\n"
        "status = main(['variants'])\n"
        "print('TORCH', 'torch' in sys.modules, status)\n",
        tmp_path,
    )
    assert "wdbc-mlp-dp" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "TORCH False 0"


def test_grading_a_classical_variant_imports_no_torch(tmp_path: Path, warm_cache: Path) -> None:
    report = write_json(tmp_path / "r.json", reference_report(warm_cache, "wdbc-hard"))
    args = grading_args(report, "wdbc-hard", warm_cache, "-q")
    result = _python(
        "import sys, pytest\n"
        f"status = pytest.main({args!r})\n"
        "print('TORCH', 'torch' in sys.modules, int(status))\n",
        tmp_path,
    )
    assert result.stdout.strip().splitlines()[-1] == "TORCH False 0", result.stdout


def test_auditing_a_torch_variant_without_torch_names_the_extra(tmp_path: Path) -> None:
    result = _python(
        BLOCK_TORCH + "from pytest_clinaudit.cli import main\n"
        "sys.exit(main(['audit', '--variant', 'wdbc-mlp', '--no-cache', '-q']))\n",
        tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"clinaudit audit: error: wdbc-mlp is a torch variant and torch is not installed: {EXTRA}\n"
    )


def test_grading_a_torch_variant_without_torch_is_a_usage_error_naming_the_extra(
    tmp_path: Path,
) -> None:
    report = write_json(submitted(tmp_path, "r.json"), {"sps": 50.0})  # not in the rootdir
    score = tmp_path / "score.json"
    args = [
        *grading_args(report, "wdbc-mlp", tmp_path / "empty-cache", "-q"),
        "--clinaudit-score-json",
        str(score),
    ]
    result = _python(
        BLOCK_TORCH + f"import pytest\nsys.exit(int(pytest.main({args!r})))\n", tmp_path
    )
    assert result.returncode == 4  # pytest's usage error
    assert (
        f"cannot build the wdbc-mlp reference: wdbc-mlp is a torch variant and torch is not "
        f"installed: {EXTRA}" in result.stderr
    )
    assert json.loads(score.read_text())["score"] is None
