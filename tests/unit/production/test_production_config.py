"""``[gateway] mode`` and ``[production]`` in the run's TOML, and ``harnessrl gateway --mode``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.cli import build_parser
from harnessrl.config import ConfigError, load_config


def test_production_tables_load(tmp_path: Path) -> None:
    path = tmp_path / "prod.toml"
    path.write_text("""
[gateway]
mode = "production"
[production]
record_fraction = 0.25
session_header = "X-Conversation"
[production.deployments.support]
[production.deployments.billing]
record_fraction = 1.0
""")
    config = load_config(path)
    assert config.gateway.mode == "production"
    prod = config.production
    assert prod.session_header == "X-Conversation" and set(prod.deployments) == {"support", "billing"}
    assert prod.record_fraction_of("support") == 0.25 and prod.record_fraction_of("billing") == 1.0
    assert load_config(None).gateway.mode == "training"  # the default


@pytest.mark.parametrize("bad", ['[production]\nrecord_fraction = 1.5', '[production.deployments."a/b"]',
                                 '[production]\nsesion_header = "x"', '[gateway]\nmode = "prod"'])
def test_bad_production_settings_name_the_key(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    with pytest.raises(ConfigError):
        load_config(path)


def test_the_gateway_command_takes_a_mode() -> None:
    args = build_parser().parse_args(["gateway", "--mode", "production", "--engine", "http://127.0.0.1:1/v1"])
    assert args.mode == "production"
    assert build_parser().parse_args(["gateway"]).mode is None  # the config file decides
    config = load_config(None, {"gateway": {"mode": args.mode}}, gateway_alone=True)
    assert config.gateway.mode == "production"


@pytest.mark.parametrize("key", ['estimator = "dr_grpo"', "per_call_rewards = true", 'reward_name = "thumbs"',
                                 "replay_best = 4"])
def test_task_loop_advantage_keys_are_refused_for_production_training(tmp_path: Path, key: str) -> None:
    """Production advantages are outcome minus a running or task-group mean: a key of the task loop's
    estimator would be silently ignored, so it is refused with the reason."""
    path = tmp_path / "prod.toml"
    base = '[run]\nsource = "production"\ndeployment = "support"\n[training]\nlr = 1e-4\n'
    path.write_text(base + "positive_weight = 0.5\n")
    assert load_config(path).training.positive_weight == 0.5  # applied by production training too
    path.write_text(base + key + "\n")
    with pytest.raises(ConfigError, match=r"not used when \[run\] source = \"production\".*group_by"):
        load_config(path)
    path.write_text(key.join(["[training]\n", "\n"]))
    assert load_config(path).run.source == "tasks"  # the task loop takes it
