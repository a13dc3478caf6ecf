"""``[gateway] mode`` and ``[production]`` in the run's TOML, and ``harnessrl gateway --mode``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from run_config import write_run_config

from harnessrl.cli import build_parser
from harnessrl.config import ConfigError, load_config


def test_production_tables_load(tmp_path: Path) -> None:
    path = write_run_config(tmp_path, {"gateway": {"mode": "production"}, "production": {
        "record_fraction": 0.25, "session_header": "X-Conversation",
        "deployments": {"support": {}, "billing": {"record_fraction": 1.0}}}})
    config = load_config(path)
    assert config.gateway.mode == "production"
    prod = config.production
    assert prod.session_header == "X-Conversation" and set(prod.deployments) == {"support", "billing"}
    assert prod.record_fraction_of("support") == 0.25 and prod.record_fraction_of("billing") == 1.0
    assert load_config(None).gateway.mode == "training"  # the default


@pytest.mark.parametrize("bad", [{"production": {"record_fraction": 1.5}}, {"production": {"deployments": {"a/b": {}}}},
                                 {"production": {"sesion_header": "x"}}, {"gateway": {"mode": "prod"}}])
def test_bad_production_settings_name_the_key(tmp_path: Path, bad: dict[str, Any]) -> None:
    path = write_run_config(tmp_path, bad)
    with pytest.raises(ConfigError):
        load_config(path)


def test_the_gateway_command_takes_a_mode() -> None:
    args = build_parser().parse_args(["gateway", "--mode", "production", "--engine", "http://127.0.0.1:1/v1"])
    assert args.mode == "production"
    assert build_parser().parse_args(["gateway"]).mode is None  # the config file decides
    config = load_config(None, {"gateway": {"mode": args.mode}}, gateway_alone=True)
    assert config.gateway.mode == "production"


@pytest.mark.parametrize("key", [{"estimator": "dr_grpo"}, {"per_call_rewards": True}, {"reward_name": "thumbs"},
                                 {"replay_best": 4}])
def test_task_loop_advantage_keys_are_refused_for_production_training(tmp_path: Path, key: dict[str, Any]) -> None:
    """Production advantages are outcome minus a running or task-group mean: a key of the task loop's
    estimator would be silently ignored, so it is refused with the reason."""
    base = {"run": {"source": "production", "deployment": "support"}, "training": {"lr": 1e-4}}
    path = write_run_config(tmp_path, base, {"training": {"positive_weight": 0.5}})
    assert load_config(path).training.positive_weight == 0.5  # applied by production training too
    write_run_config(path, base, {"training": key})
    with pytest.raises(ConfigError, match=r"not used when \[run\] source = \"production\".*group_by"):
        load_config(path)
    write_run_config(path, {"training": key})
    assert load_config(path).run.source == "tasks"  # the task loop takes it
