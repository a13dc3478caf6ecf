"""Real containers (Podman here, Docker where it is the engine): each test builds tiny task images from the
offline base image (``bash scripts/podman.sh`` makes it and tags it ``python:3.11-slim``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harnessrl.environments.engine import Engine, EngineUnavailable, find_engine


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        found = find_engine("auto")
    except EngineUnavailable as exc:
        pytest.skip(f"no container engine: {exc}")
    done = asyncio.run(found.run("image", "exists", "python:3.11-slim", check=False))
    if done.returncode != 0:
        pytest.skip("no python:3.11-slim image (bash scripts/podman.sh makes it offline)")
    return found


def harbor_task(root: Path, name: str, *, dockerfile: str | None = None, test_sh: str | None = None,
                files: dict[str, str] | None = None, toml: str = "[verifier]\ntimeout_sec = 30\n") -> Path:
    """A Harbor task folder: an image with /app/data.txt = 42; the tests want /app/answer.txt = 42."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text(
        dockerfile or "FROM python:3.11-slim\nWORKDIR /app\nCOPY data.txt /app/\n")
    (task / "environment" / "data.txt").write_text("42\n")
    (task / "instruction.md").write_text("Copy the number in /app/data.txt to /app/answer.txt.\n")
    (task / "task.toml").write_text(toml)
    (task / "tests" / "test.sh").write_text(test_sh or (
        "#!/bin/bash\npython3 /tests/check.py > /logs/verifier/reward.txt\n"))
    (task / "tests" / "check.py").write_text(
        "from pathlib import Path\np = Path('/app/answer.txt')\n"
        "print(1.0 if p.is_file() and p.read_text().strip() == '42' else 0.0)\n")
    for rel, text in (files or {}).items():
        (task / rel).write_text(text)
    return task
