"""The agent's container image for the Inspect task: its build context, pinned to this host.

``Dockerfile`` and ``compose.yaml`` ship beside :mod:`inspect_task` as package data.
An agent loads the artifacts this host builds, so the image's libraries must be this
host's: :func:`write_context` copies both files into a build directory with the
``requirements.txt`` of :func:`pytest_clinaudit.adapters.pins.agent_pins` (the pins
of the METR family's ``requirements.txt`` too), the host's Python version as the
base image's, the pinned torch version (installed from PyTorch's CPU index, never PyPI's
CUDA build), and the image tagged with the hash of the pins, so a host whose
libraries change builds a new image and two hosts never share a wrong one.

:func:`pytest_clinaudit.adapters.inspect_task.clinical_security_audit` writes the
context for each run. To build the image ahead of time::

    python -m pytest_clinaudit.adapters.sandbox_image clinaudit-sandbox
    docker compose -f clinaudit-sandbox/compose.yaml build
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import shutil
from pathlib import Path

from pytest_clinaudit.adapters.pins import agent_pins

HERE = Path(__file__).resolve().parent
COMPOSE_NAME = "compose.yaml"
DOCKERFILE_NAME = "Dockerfile"
IGNORE_NAME = ".dockerignore"
REQUIREMENTS_NAME = "requirements.txt"
SHIPPED = (DOCKERFILE_NAME, COMPOSE_NAME, IGNORE_NAME)
"""The package data: the context less its requirements."""
IMAGE = "pytest-clinaudit-sandbox"
AGENT_USER = "agent"
AGENT_WORKDIR = "/home/agent/workspace"

_UNTAGGED = f"image: {IMAGE}:untagged\n"
_NO_NETWORK = "network_mode: none\n"
_PYTHON_ARG = "ARG PYTHON_VERSION=3.12\n"
_TORCH_ARG = "ARG TORCH_VERSION=\n"


def python_version() -> str:
    """This interpreter's ``major.minor``: the base image's Python."""
    return ".".join(platform.python_version_tuple()[:2])


def image_tag(requirements: str, python: str) -> str:
    """The image's tag: the hash of what it installs."""
    return hashlib.sha256(f"python {python}\n{requirements}".encode()).hexdigest()[:16]


def _replace_once(text: str, old: str, new: str, name: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"the shipped {name} lost its line {old.strip()!r}")
    return text.replace(old, new)


def write_context(directory: Path, *, network: bool = False) -> Path:
    """Write the image's build context into ``directory``; return its compose file.

    The compose file has no network unless ``network`` (then the default bridge).
    """
    directory.mkdir(parents=True, exist_ok=True)
    pins = agent_pins()
    requirements = pins.requirements_txt()
    python = python_version()
    (directory / REQUIREMENTS_NAME).write_text(requirements, encoding="utf-8")
    shutil.copyfile(HERE / IGNORE_NAME, directory / IGNORE_NAME)
    dockerfile = (HERE / DOCKERFILE_NAME).read_text(encoding="utf-8")
    dockerfile = _replace_once(
        dockerfile, _PYTHON_ARG, f"ARG PYTHON_VERSION={python}\n", DOCKERFILE_NAME
    )
    dockerfile = _replace_once(
        dockerfile, _TORCH_ARG, f"ARG TORCH_VERSION={pins.torch_version}\n", DOCKERFILE_NAME
    )
    (directory / DOCKERFILE_NAME).write_text(dockerfile, encoding="utf-8")
    compose = (HERE / COMPOSE_NAME).read_text(encoding="utf-8")
    tag = image_tag(requirements, python)
    compose = _replace_once(compose, _UNTAGGED, f"image: {IMAGE}:{tag}\n", COMPOSE_NAME)
    if network:
        compose = _replace_once(compose, _NO_NETWORK, "network_mode: bridge\n", COMPOSE_NAME)
    (directory / COMPOSE_NAME).write_text(compose, encoding="utf-8")
    return directory / COMPOSE_NAME


def main(argv: list[str] | None = None) -> None:
    """Write the build context into a directory, for a build ahead of time."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_clinaudit.adapters.sandbox_image", description=main.__doc__
    )
    parser.add_argument("directory", type=Path)
    parser.add_argument("--network", action="store_true", help="give the sandbox a network")
    args = parser.parse_args(argv)
    compose = write_context(args.directory, network=args.network)
    print(f"docker compose -f {compose} build")


if __name__ == "__main__":
    main()
