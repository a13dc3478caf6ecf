"""``--set section.key=VALUE``: any config key from the command line, deep-merged over the file and checked by
the same strict model; ``--run-dir``/``--steps``/``--seed`` are the same override under other names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from run_config import write_run_config

from harnessrl.cli import build_parser, main
from harnessrl.config import ConfigError, HarnessConfig, load_config, merge, parse_setting


@pytest.mark.parametrize(("text", "value"), [
    ("run.steps=3", 3),
    ("training.lr=1e-5", 1e-5),
    ("run.dynamic_sampling=true", True),
    ('runner.command=["python", "agent.py"]', ["python", "agent.py"]),
    ('engine.model="a b"', "a b"),
    ("engine.model=HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),  # not TOML: a string
    ("run.dir=runs/x", "runs/x"),
    ("runner.env.X=a=b", "a=b"),  # the first "=" splits
    ("run.dir=", ""),
])
def test_a_value_is_toml_when_it_parses_else_a_string(text: str, value: Any) -> None:
    key = text.partition("=")[0].split(".")
    table = parse_setting(text)
    for part in key:
        table = table[part]
    assert table == value and type(table) is type(value)


def test_a_dotted_key_is_a_nested_table() -> None:
    assert parse_setting("runner.container.engine=podman") == {"runner": {"container": {"engine": "podman"}}}


@pytest.mark.parametrize("text", ["run.steps", "=3", "run..steps=3", ".steps=3", "run. =3"])
def test_a_malformed_setting_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_setting(text)


def test_merge_goes_table_by_table() -> None:
    into: dict[str, Any] = {"training": {"lora": {"r": 4, "alpha": 8}, "lr": 1.0}}
    merge(into, {"training": {"lora": {"r": 8}}, "run": {"steps": 2}})
    assert into == {"training": {"lora": {"r": 8, "alpha": 8}, "lr": 1.0}, "run": {"steps": 2}}
    assert merge({"training": {"lora": {"r": 4}}}, {"training": {"lora": False}}) == {"training": {"lora": False}}


def test_a_nested_override_keeps_the_files_other_keys(tmp_path: Path) -> None:
    cfg = write_run_config(tmp_path, {"training": {"lora": {"r": 4, "alpha": 12}}})
    config = load_config(cfg, parse_setting("training.lora.r=8"))
    assert config.training.lora is not None and (config.training.lora.r, config.training.lora.alpha) == (8, 12)


def test_an_unknown_key_is_named_by_the_config_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'rr' in \[training.lora\]; did you mean 'r'"):
        load_config(write_run_config(tmp_path, {}), parse_setting("training.lora.rr=8"))


def test_a_path_on_the_command_line_is_relative_to_the_working_directory(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's paths stay relative to its folder; those given with ``--set`` are the shell's, like --run-dir."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "work").mkdir()
    for folder in ("conf", "work"):
        (tmp_path / folder / "agent.py").write_text("")
    cfg = write_run_config(tmp_path / "conf", {"runner": {"command": ["python", "agent.py"]},
                                               "rewards": {"verifier": ["python", "agent.py"]}})
    monkeypatch.chdir(tmp_path / "work")
    overrides = merge(parse_setting('runner.command=["python", "agent.py"]'), parse_setting("run.dir=out"))
    merge(overrides, parse_setting('runner.container.mounts=["data"]'))
    config = load_config(cfg, merge(overrides, parse_setting("tasks.train=tasks.jsonl")))
    assert config.runner.command == ["python", str(tmp_path / "work" / "agent.py")]
    assert config.rewards.verifier == ["python", str(tmp_path / "conf" / "agent.py")]  # from the file
    assert config.run_dir == tmp_path / "work" / "out"
    assert config.resolve(config.tasks.train) == tmp_path / "work" / "tasks.jsonl"
    assert config.runner.container.mounts == [str(tmp_path / "work" / "data")]


class _Started(Exception):
    """Stands in for the run: carries the config ``harnessrl train`` would have trained with."""

    def __init__(self, config: HarnessConfig) -> None:
        self.config = config


def _raise_started(config: HarnessConfig) -> None:
    raise _Started(config)


def test_train_applies_set_and_its_flags_to_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harnessrl.drivers.rl

    cfg = write_run_config(tmp_path / "conf", {"run": {"steps": 10, "seed": 1}, "training": {"lora": {"alpha": 12}}})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harnessrl.drivers.rl, "run_train", _raise_started)
    with pytest.raises(_Started) as started:
        main(["train", str(cfg), "--set", "training.lora.r=8", "--set", "runner.container.engine=podman",
              "--set", "run.steps=5", "--run-dir", "out", "--seed", "7"])
    config = started.value.config
    assert config.training.lora is not None and (config.training.lora.r, config.training.lora.alpha) == (8, 12)
    assert config.runner.container.engine == "podman"
    assert (config.run.steps, config.run.seed) == (5, 7)
    assert config.run_dir == tmp_path / "out"  # --run-dir: the working directory's, as before


def test_train_refuses_an_unknown_or_malformed_setting(tmp_path: Path) -> None:
    cfg = str(write_run_config(tmp_path, {}))
    with pytest.raises(SystemExit, match="did you mean 'r'"):  # the strict model, before anything starts
        main(["train", cfg, "--set", "training.lora.rr=8"])
    with pytest.raises(SystemExit, match=r"--set 'training\.lora\.r': expected KEY=VALUE"):
        main(["train", cfg, "--set", "training.lora.r"])


@pytest.mark.parametrize("command", ["train", "collect", "eval", "sft"])
def test_every_command_that_reads_a_run_config_takes_set(command: str) -> None:
    args = build_parser().parse_args([command, "c.toml", "--set", "run.steps=1", "--set", "training.lr=1e-5"])
    assert args.set == ["run.steps=1", "training.lr=1e-5"]


def test_train_help_lists_set(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--set KEY=VALUE" in capsys.readouterr().out
