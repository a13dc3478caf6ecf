"""examples/swebench stays one consistent instance without a container: the record's base_commit is the
commit commit_base.sh makes of statskit/ (as the image build does), its test patch and both patches apply
there, and the unfixed code fails exactly the record's FAIL_TO_PASS test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "swebench"


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_the_record_matches_the_repository_it_names(tmp_path):
    (record,) = [json.loads(line) for line in (EXAMPLE / "instances.jsonl").read_text().splitlines()]
    repo = tmp_path / "testbed"
    shutil.copytree(EXAMPLE / "statskit", repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    made = run("sh", str(EXAMPLE / "commit_base.sh"), str(repo), cwd=tmp_path)
    assert made.stdout.strip() == record["base_commit"], made.stderr
    (tmp_path / "test.patch").write_text(record["test_patch"])
    assert run("git", "apply", "../test.patch", cwd=repo).returncode == 0
    assert record["patch"] == (EXAMPLE / "gold.patch").read_text()
    for patch in ("gold.patch", "bad.patch"):
        assert run("git", "apply", "--check", str(EXAMPLE / patch), cwd=repo).returncode == 0
    tests = run(sys.executable, "-B", "-m", "unittest", "-v", "tests/test_stats.py", cwd=repo)
    failed = [line.split(" ... ")[0] for line in tests.stderr.splitlines() if line.endswith(" ... FAIL")]
    assert failed == json.loads(record["FAIL_TO_PASS"])
