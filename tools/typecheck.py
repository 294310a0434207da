"""Type-check the package as it is installed: ``python tools/typecheck.py``.

pyproject.toml maps ``reference/`` and ``variants/`` into ``pytest_clinaudit``,
a layout mypy cannot resolve from the checkout. So this installs the checkout
with pip (the same mapping every install uses) into ``build/typecheck/site``,
runs ``mypy --strict`` (settings in pyproject.toml) on that copy, and prints
each message with the path of the file in the checkout. CI runs exactly this;
extra arguments go to mypy. Exit status: mypy's, or pip's if the install fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "typecheck"


def source_paths() -> list[tuple[str, str]]:
    """(installed prefix, checkout prefix) for each mapped package, longest prefix first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"].get("package-dir", {})
    pairs = [
        (package.replace(".", "/") + "/", directory.rstrip("/") + "/")
        for package, directory in mapping.items()
    ]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def main(argv: list[str]) -> int:
    site = WORK / "site"
    shutil.rmtree(site, ignore_errors=True)
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(ROOT),
        ],
        check=False,
    )
    if install.returncode:
        return install.returncode
    mypy = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(WORK / "mypy_cache"),
            "-p",
            "pytest_clinaudit",
            *argv,
        ],
        cwd=site,
        env={**os.environ, "MYPYPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    paths = source_paths()
    for line in (mypy.stdout + mypy.stderr).splitlines():
        for installed, checkout in paths:
            if line.startswith(installed):
                line = checkout + line[len(installed) :]
                break
        print(line)
    return mypy.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
