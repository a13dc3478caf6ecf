"""The run config file and task loading: clear errors for bad input, paths resolved from the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.config import ConfigError, load_config
from harnessrl.tasks import TaskLoadError, load_tasks
from harnessrl.types import TaskSplit


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_work_and_paths_resolve_from_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    cfg = load_config(write(tmp_path, '[runner]\ncommand = ["python", "agent.py"]\n[run]\ndir = "out"\n'))
    assert cfg.runner.command == ["python", str(tmp_path / "agent.py")]
    assert cfg.run_dir == tmp_path / "out"
    assert cfg.store_url == f"sqlite:///{tmp_path / 'out' / 'store.db'}"
    assert cfg.gateway.render_mode == "gateway" and cfg.gateway.port == 0


def test_lora_false_in_toml_means_full_finetuning(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "[training]\nlora = false\n")).training.lora is None
    assert load_config(write(tmp_path, "[training.lora]\nr = 4\n")).training.lora.r == 4
    assert load_config(write(tmp_path, "")).training.lora is not None  # LoRA by default
    with pytest.raises(ConfigError, match="lora"):
        load_config(write(tmp_path, '[training]\nlora = "yes"\n'))


def test_kubernetes_commands_stay_pod_paths_and_templates_resolve(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    cfg = load_config(write(tmp_path, '[runner]\nkind = "kubernetes"\ncommand = ["python", "agent.py"]\n'
                                      '[runner.kubernetes]\njob_template_file = "job.yaml"\n'))
    assert cfg.runner.command == ["python", "agent.py"]
    assert cfg.runner.kubernetes.job_template_file == str(tmp_path / "job.yaml")


@pytest.mark.parametrize("text, needle", [
    ("[run]\nsteps = -1\n", "steps"),
    ("[run]\nnope = 1\n", "nope"),
    ("[run\n", "not valid TOML"),
])
def test_bad_configs_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(write(tmp_path, text))


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_the_gateway_command_reads_the_same_config_with_the_gateways_own_defaults(tmp_path: Path) -> None:
    """``harnessrl gateway`` validates the whole file like ``train`` (a typo is named, not ignored), but
    serves on the gateway's own port and render mode unless the file or a flag says otherwise."""
    alone = load_config(None, {"gateway": {"engines": ["http://127.0.0.1:9/v1"]}}, gateway_alone=True)
    assert (alone.gateway.port, alone.gateway.render_mode) == (8400, "engine")
    run = load_config(write(tmp_path, "[store]\nurl = 'sqlite:///x.db'\n"))
    assert (run.gateway.port, run.gateway.render_mode) == (0, "gateway") and run.store.url == "sqlite:///x.db"
    flagged = load_config(write(tmp_path, "[gateway]\nport = 9000\n"), {"gateway": {"port": 9001}},
                          gateway_alone=True)
    assert flagged.gateway.port == 9001
    with pytest.raises(ConfigError, match="gatway"):
        load_config(write(tmp_path, "[gatway]\nport = 9000\n"), gateway_alone=True)
    with pytest.raises(SystemExit, match="gatway"):  # the command line says it in one line, no traceback
        from harnessrl.cli import main

        main(["gateway", "--config", str(tmp_path / "c.toml"), "--engine", "http://127.0.0.1:9/v1"])


def _tasks(tmp_path: Path, train: list[object], eval_: list[object] | None = None) -> Path:
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in train))
    extra = ""
    if eval_ is not None:
        (tmp_path / "eval.jsonl").write_text("".join(json.dumps(t) + "\n" for t in eval_))
        extra = 'eval = "eval.jsonl"\n'
    return write(tmp_path, f'[tasks]\ntrain = "train.jsonl"\n{extra}')


def test_tasks_load_with_assets_kept_out_of_the_input(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    cfg = load_config(_tasks(tmp_path, [{"id": "a", "input": {"q": 1}, "workspace": "ws",
                                         "verifier_input": {"answer": "x"}}], [{"id": "b", "input": {}}]))
    tasks = load_tasks(cfg, "run1")
    [a] = tasks[TaskSplit.TRAIN]
    assert a.task.input == {"q": 1} and a.task.split == TaskSplit.TRAIN and a.task.run_id == "run1"
    assert a.assets.workspace == tmp_path / "ws" and a.assets.verifier_input == {"answer": "x"}
    assert [t.task.id for t in tasks[TaskSplit.EVAL]] == ["b"]


@pytest.mark.parametrize("train, eval_, needle", [
    ([{"input": {}}], None, "no 'id'"),
    ([{"id": "a", "input": [1]}], None, "must be an object"),
    ([{"id": "a", "input": {}}], [{"id": "a", "input": {}}], "appears twice"),
    ([[1, 2]], None, "JSON object"),
])
def test_bad_tasks_name_the_problem(tmp_path: Path, train: list[object], eval_: list[object] | None,
                                    needle: str) -> None:
    cfg = load_config(_tasks(tmp_path, train, eval_))
    with pytest.raises(TaskLoadError, match=needle):
        load_tasks(cfg, "r")


def test_task_file_errors_give_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text('{"id": "a", "input": {}}\n{broken\n')
    cfg = load_config(write(tmp_path, '[tasks]\ntrain = "train.jsonl"\n'))
    with pytest.raises(TaskLoadError, match=r"train.jsonl:2"):
        load_tasks(cfg, "r")
    cfg = load_config(write(tmp_path, '[tasks]\ntrain = "nope.jsonl"\n'))
    with pytest.raises(TaskLoadError, match="not found"):
        load_tasks(cfg, "r")


def test_run_seed_seeds_engine_and_trainer_unless_they_say_otherwise(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "[run]\nseed = 7\n"))
    assert (cfg.run.seed, cfg.engine.seed, cfg.training.seed) == (7, 7, 7)
    cfg = load_config(write(tmp_path, "[run]\nseed = 7\n[engine]\nseed = 1\n[training]\nseed = 2\n"))
    assert (cfg.run.seed, cfg.engine.seed, cfg.training.seed) == (7, 1, 2)
    assert load_config(write(tmp_path, "[run]\nseed = 3\n"), {"run": {"seed": 5}}).engine.seed == 5  # --seed


def test_the_demo_config_is_seeded_with_the_measured_settings() -> None:
    """dr_grpo with success replay and a 2-step lr warmup, no dynamic sampling, two waves more and no update
    until the run's first 1.0 (10 steps, held ones included), sampled at temperature 1.0 for training, served
    in bf16 where the CPU has it: the best measured settings (docs/training.md, section 7)."""
    cfg = load_config(Path(__file__).resolve().parents[3] / "examples" / "demo" / "config.toml")
    assert not cfg.run.dynamic_sampling and cfg.training.estimator == "dr_grpo"
    assert cfg.run.explore_until_reward == 1.0 and cfg.run.max_attempts_per_step == 72
    assert cfg.run.explore_hold and cfg.run.steps == 10
    assert cfg.engine.dtype == "auto" and cfg.training.dtype == "auto"  # bf16 for both, or fp32 for both
    assert cfg.training.replay_best == 4 and cfg.training.warmup_steps == 2
    assert cfg.run.train_temperature == 1.0 and cfg.run.eval_temperature == 0.0
    assert cfg.training.seed == cfg.engine.seed == cfg.run.seed


def test_hold_without_a_target_is_refused() -> None:
    from harnessrl.config import RunConfig

    with pytest.raises(ValueError, match="explore_until_reward"):
        RunConfig(explore_hold=True)
    assert RunConfig(explore_hold=True, explore_until_reward=1.0).explore_hold
