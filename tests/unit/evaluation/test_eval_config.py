"""``[eval]`` and ``[harnesses.<name>]`` as a user writes them: paths from the config file, typos named."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.config import ConfigError, load_config


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "agent.py").write_text("")
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_harness_is_the_runner_with_its_keys_replaced_and_its_paths_from_the_config_file(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, """
[runner]
command = ["python", "agent.py"]
timeout_s = 30
env = {A = "1"}
[harnesses.one]
env = {A = "2"}
[harnesses.two]
command = ["python", "agent.py", "--fast"]
sandbox_read_only = ["data"]
"""))
    runners = config.harness_runners()
    assert list(runners) == ["one", "two"]
    assert runners["one"].command == ["python", str(tmp_path / "agent.py")] and runners["one"].env == {"A": "2"}
    assert runners["two"].command[1:] == [str(tmp_path / "agent.py"), "--fast"] and runners["two"].timeout_s == 30
    assert runners["two"].sandbox_read_only == [str(tmp_path / "data")]


def test_without_harness_sections_the_runner_is_the_default_harness(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, '[runner]\ncommand = ["python", "agent.py"]\n'))
    assert list(config.harness_runners()) == ["default"]
    assert config.eval.checkpoints == ["base"] and config.eval.attempts == 4


@pytest.mark.parametrize(("text", "message"), [
    ('[harnesses.one]\ntimeout = 3\n', r"\[harnesses.one\].*timeout"),
    ('[harnesses.one]\ncommand = ["x"]\n[eval]\nharnesses = ["two"]\n', "'two', which is not a"),
    ('[eval]\nattempts = 0\n', "attempts"),
    ('[eval]\ncheckpoint = ["base"]\n', "did you mean 'checkpoints'"),
])
def test_mistakes_are_refused_naming_the_section_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, text))
