"""The one TOML config file of a run, validated by pydantic.

Each part owns its section model (``harnessrl/<part>/config.py``); this module only composes them and
adds the run-level sections (``[run]``, ``[tasks]``, ``[store]``). Every key has a default that works on
a laptop, so an empty file is a valid (if useless) config; the only thing a real run must say is which
harness to launch (``[runner] command``) and which tasks to give it (``[tasks] train``).
"""

from __future__ import annotations

import copy
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from harnessrl.config_base import ConfigSection, describe_errors
from harnessrl.engines.config import EngineConfig
from harnessrl.evaluation.config import DEFAULT_HARNESS, EvalConfig
from harnessrl.gateway.config import GatewayConfig
from harnessrl.policies.config import PolicyConfig, RoutingConfig
from harnessrl.production.config import ProductionConfig
from harnessrl.rewards.config import RewardConfig
from harnessrl.runners.config import NO_LOCAL_VERIFIER_ON_KUBERNETES, RunnerConfig
from harnessrl.sft.config import DistillConfig, SftConfig
from harnessrl.training.config import TrainingConfig

#: ``[training]`` keys of the task loop's advantages (``training/advantages.py``) that production training
#: does not use: refused there when set, so a config never claims an estimator that is not applied.
TASK_ONLY_TRAINING_KEYS = frozenset({"estimator", "advantage_eps", "reward_name", "per_call_rewards", "discount",
                                     "drop_zero_variance_groups", "replay_best"})


class ConfigError(ValueError):
    """The config file is missing, not TOML, or fails validation (the message names the bad key, its section
    and, for an unknown key, the valid key it was probably meant to be)."""


class RunConfig(ConfigSection):
    """How the controller drives training: steps, batch shape, evaluation, sync vs async."""

    name: str = Field("run", description="Human name of the run (shown in metrics and the dashboard).")
    dir: str = Field("runs/default", description="Run directory: store, checkpoints, metrics, workspaces.")
    steps: int = Field(10, ge=0, description="Training steps (each ends in one policy update).")
    tasks_per_step: int = Field(8, ge=1, description="Distinct train tasks per step.")
    attempts_per_task: int = Field(4, ge=1, description="Rollouts per task per step: the GRPO group size `n`.")
    eval_every: int = Field(0, ge=0, description="Evaluate on held-out tasks every K steps (0: start and end only).")
    eval_at_start: bool = Field(True, description="Evaluate the untrained policy before step 1.")
    eval_tasks: int | None = Field(None, ge=1, description="Cap on held-out tasks per evaluation (None: all).")
    eval_temperature: float | None = Field(
        0.0, ge=0.0, description="Temperature pinned for evaluation calls (0 = greedy); None keeps the harness's."
    )
    train_temperature: float | None = Field(
        1.0, ge=0.0, description="Temperature pinned for training calls (None keeps the harness's own)."
    )
    mode: Literal["sync", "async", "rft", "distill"] = Field(
        "sync", description="sync: generate then train; async: the next step's rollouts run during training; "
        "rft: rejection-sampling fine-tuning (train with the SFT loss on attempts with reward >= [sft] "
        "min_reward, default 1.0); distill: on-policy distillation (per-token reverse KL to [distill] teacher). "
        "docs/sft.md."
    )
    max_staleness: int = Field(
        1, ge=0, description="async: most policy versions a trained rollout may lag behind the trainer."
    )
    max_retries: int = Field(
        2, ge=0, description="Re-queues of an attempt that failed for infrastructure reasons, per step."
    )
    seed: int = Field(
        0, description="Seed of the run: task order, dynamic-sampling extras, and (unless [engine] seed or "
        "[training] seed say otherwise) the engine's sampling and the trainer's RNGs. The same seed on the same "
        "machine picks the same tasks and samples; concurrent harnesses can still reorder engine requests."
    )
    dynamic_sampling: bool = Field(
        False, description="Keep launching groups of extra train tasks until the step has tasks_per_step groups "
        "whose rewards differ (zero-variance groups carry no gradient), as DAPO does; bounded by "
        "max_attempts_per_step. Counted per step (count/dynamic.*)."
    )
    source: Literal["tasks", "production"] = Field(
        "tasks", description="tasks: launch attempts of [tasks] and train on them; production: serve the "
        "deployment [run] deployment through the production gateway and train off-policy on its recorded "
        "sessions whose feedback window closed ([production.training], docs/production.md). `steps` counts "
        "updates either way."
    )
    deployment: str | None = Field(None, description="source = production: the deployment whose sessions train.")
    explore_until_reward: float | None = Field(
        None, description="Keep launching waves of extra train tasks until an attempt of the step scores at least "
        "this (the full reward), within max_attempts_per_step; the step then trains tasks_per_step groups, one "
        "that reached the step's best reward first (training/group_choice.py). For tasks whose full answer is "
        "too rare early for a normal step to sample it (docs/training.md, section 7). None: off."
    )
    max_attempts_per_step: int | None = Field(
        None, ge=1, description="dynamic_sampling / explore_until_reward: most attempts one step may launch, "
        "extras included (None: 3 x tasks_per_step x attempts_per_task)."
    )
    keep_checkpoints: int | None = Field(
        None, ge=1, description="Keep only the newest K step checkpoints (checkpoints/step_N: weights and "
        "optimizer state) and published version folders (policies/vN), deleting older ones after each step. A "
        "full fine-tune writes ~1.6 GB a step for a 135M model in fp32 (a LoRA run a few MB to a few hundred), "
        "so a long run fills a disk. None: keep every step. A resumed run needs only the newest."
    )
    explore_hold: bool = Field(
        False, description="With explore_until_reward: until some attempt of the run has reached that reward, "
        "steps train nothing and the policy stays as it is while the waves search (the steps still count). "
        "Before the full answer exists, every update can only reinforce partial ones, which makes the full "
        "answer rarer with each step (docs/training.md, section 7). False: those steps train their best groups."
    )

    @model_validator(mode="after")
    def _hold_needs_a_target(self) -> RunConfig:
        if self.explore_hold and self.explore_until_reward is None:
            raise ValueError("[run] explore_hold holds the policy until explore_until_reward is reached: set "
                             "explore_until_reward too (e.g. 1.0), or remove explore_hold")
        return self

    @model_validator(mode="after")
    def _production_keeps_its_versions(self) -> RunConfig:
        if self.keep_checkpoints is not None and self.source == "production":
            raise ValueError("[run] keep_checkpoints deletes old versions' checkpoints, and source = "
                             "\"production\" rolls a canary back to its stable version's checkpoint, however old: "
                             "remove keep_checkpoints")
        return self


class TasksConfig(ConfigSection):
    """Where tasks come from: JSONL files (one object per line with `id` and `input`), folders of Harbor tasks
    (terminal-bench's format, docs/harbor.md) or a HF dataset."""

    train: str | None = Field(None, description="Training tasks (relative to the config file): a JSONL file, or "
                              "a folder of Harbor task folders (or one task folder).")
    eval: str | None = Field(None, description="Held-out tasks, never trained on: a JSONL file or a Harbor folder.")
    format: Literal["auto", "jsonl", "harbor", "swebench"] = Field(
        "auto", description="How `train`/`eval` are read: `auto` reads a folder as Harbor tasks and a file as "
        "JSONL; `jsonl` or `harbor` insist (a path of the other kind is an error); `swebench`: a JSONL of SWE-bench "
        "rows, each instance run in its image (docs/swebench.md)."
    )
    dataset: str | None = Field(None, description="A `datasets` dataset name or path instead of JSONL.")
    dataset_train_split: str = Field("train", description="Split of `dataset` used for training.")
    dataset_eval_split: str | None = Field("test", description="Split of `dataset` held out.")
    id_field: str = Field("id", description="Field holding a task's id.")
    input_field: str | None = Field(
        "input", description="Field holding the task input object; None: the whole record minus the id."
    )


class StoreConfig(ConfigSection):
    """Where the run is recorded, and for how long its bulky parts are kept."""

    url: str | None = Field(None, description="Store URL; default: sqlite:///<run dir>/store.db.")
    retention: str | None = Field(
        None,
        description="How long calls' request/response text, token arrays and rollout logs are kept after "
        "a rollout finished, e.g. '30d', '12h' (a run that has not ended keeps everything); None keeps "
        "them. Applied by `harnessrl purge` (docs/retention.md); recorded with each run, so it is per run.",
    )

    @field_validator("retention")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        from harnessrl.store.retention import parse_duration

        if value is not None:
            parse_duration(value)
        return value


class HarnessConfig(ConfigSection):
    """The whole config file."""

    run: RunConfig = Field(default_factory=RunConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    gateway: GatewayConfig = Field(default_factory=lambda: GatewayConfig(port=0, render_mode="gateway"))
    engine: EngineConfig = Field(default_factory=EngineConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    rewards: RewardConfig = Field(default_factory=RewardConfig)
    sft: SftConfig = Field(default_factory=SftConfig)
    distill: DistillConfig = Field(default_factory=DistillConfig)
    policies: dict[str, PolicyConfig] = Field(
        default_factory=dict, description="Several policies in one run ([policies.<name>], docs/policies.md); "
        "empty: one policy, as before.")
    routing: RoutingConfig = Field(default_factory=RoutingConfig,
                                   description="Which policy serves a call ([routing], with [policies]).")
    production: ProductionConfig = Field(default_factory=ProductionConfig, description="Production mode "
                                         "([gateway] mode = 'production'): deployments, sessions, feedback.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="What `harnessrl eval` runs (docs/eval.md).")
    harnesses: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Harnesses `harnessrl eval` compares ([harnesses.<name>]): each is "
        "[runner] with the keys it sets replaced (command, env, timeout_s, ...).")
    #: Folder of the config file: relative paths in it resolve from here.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    @model_validator(mode="after")
    def _one_seed(self) -> HarnessConfig:
        """``[run] seed`` seeds the engine's sampling and the trainer unless their sections set their own."""
        if "seed" not in self.engine.model_fields_set:
            self.engine.seed = self.run.seed
        if "seed" not in self.training.model_fields_set:
            self.training.seed = self.run.seed
        return self

    @model_validator(mode="after")
    def _production_source(self) -> HarnessConfig:
        """Training from production traffic needs a deployment and the gateway in production mode."""
        if self.run.source != "production":
            return self
        if not self.run.deployment:
            raise ValueError('[run] source = "production" needs [run] deployment = "<name>"')
        if self.gateway.mode != "production":
            if "mode" in self.gateway.model_fields_set:
                raise ValueError('[run] source = "production" serves the deployment: set [gateway] mode = '
                                 '"production" (or leave it unset)')
            self.gateway.mode = "production"
        ignored = sorted(TASK_ONLY_TRAINING_KEYS & self.training.model_fields_set)
        if ignored:
            raise ValueError(f"[training] {', '.join(ignored)}: not used when [run] source = \"production\" (a "
                             "session's advantage is its outcome minus a running or task-group mean, "
                             "[production.training] group_by and baseline_decay, docs/production.md); remove it")
        if self.run.deployment not in self.production.deployments:  # created at start, with the defaults
            from harnessrl.production.config import DeploymentConfig, check_deployment_name

            check_deployment_name(self.run.deployment)
            self.production.deployments[self.run.deployment] = DeploymentConfig()
        return self

    @model_validator(mode="after")
    def _replay_where_it_applies(self) -> HarnessConfig:
        """Success replay adds past attempts to a policy-gradient batch: refused where it would be ignored."""
        if self.training.replay_best and (self.run.mode in ("rft", "distill") or self.policies):
            where = f'[run] mode = "{self.run.mode}"' if self.run.mode in ("rft", "distill") else "[policies]"
            raise ValueError(f"[training] replay_best is not used with {where} (it replays past attempts into "
                             "the single policy's policy-gradient batch); remove it")
        return self

    @model_validator(mode="after")
    def _verifier_runs_where_the_workspace_is(self) -> HarnessConfig:
        """Refused at start: accepted, this config would fail every attempt as infra once scored."""
        if self.runner.kind == "kubernetes" and self.rewards.verifier:
            raise ValueError(f"[rewards] verifier cannot be used with Kubernetes attempts: "
                             f"{NO_LOCAL_VERIFIER_ON_KUBERNETES}")
        return self

    @model_validator(mode="after")
    def _on_update_fits_the_engine(self) -> HarnessConfig:
        """``[engine] on_update`` other than 'drain' is a property of one engine: refused where it would be
        ignored; 'keep' serves two adapters at once, so a launched vLLM keeps two per trained policy."""
        how = self.engine.on_update
        if how == "continue" and self.engine.kind != "embedded":
            raise ValueError('[engine] on_update = "continue" needs the embedded engine (it recomputes the KV of '
                             'generations in flight); with vLLM and LoRA use "keep", else "drain"')
        if how == "keep":
            if self.engine.kind != "vllm" or self.training.lora is None:
                raise ValueError('[engine] on_update = "keep" needs vLLM and LoRA training (the old adapter '
                                 'keeps serving the calls in flight while the new one takes new calls); with '
                                 'the embedded engine use "continue"')
            vllm = self.engine.vllm
            trained = max(1, sum(not p.frozen for p in self.policies.values()))
            if "max_loras" not in vllm.model_fields_set:
                vllm.max_loras = max(vllm.max_loras, 2 * trained)
            elif vllm.max_loras < 2 * trained:
                raise ValueError(f'[engine] on_update = "keep" serves two adapters per trained policy at an '
                                 f'update: [engine.vllm] max_loras = {vllm.max_loras} is below {2 * trained}')
        return self

    @model_validator(mode="after")
    def _policies_routed(self) -> HarnessConfig:
        """Routes must name defined policies, and a run with policies must train at least one."""
        if not self.policies:
            if self.routing.models or self.routing.default:
                raise ValueError("[routing] needs [policies.<name>] sections to route to")
            return self
        from harnessrl.policies.config import ServedPolicy
        from harnessrl.policies.routing import Router

        Router(self.routing, {n: ServedPolicy(frozen=p.frozen) for n, p in self.policies.items()})
        trained = sum(not p.frozen for p in self.policies.values())
        if not trained:
            raise ValueError("every policy in [policies] is frozen: nothing would be trained")
        vllm = self.engine.vllm
        if "max_loras" not in vllm.model_fields_set:  # a launched vLLM keeps every policy's adapter active
            vllm.max_loras = max(vllm.max_loras, trained)
        elif vllm.max_loras < trained:
            raise ValueError(f"[engine.vllm] max_loras = {vllm.max_loras} is below the {trained} trained "
                             "policies: vLLM could not batch their adapters together; raise it or leave it unset")
        return self

    @model_validator(mode="after")
    def _harnesses_are_runners(self) -> HarnessConfig:
        """Each ``[harnesses.<name>]`` is checked as the runner it makes now, not when its first attempt starts."""
        runners = self.harness_runners()
        for name in self.eval.harnesses:
            if name not in runners:
                raise ValueError(f"[eval] harnesses names {name!r}, which is not a [harnesses.<name>] section "
                                 f"(defined: {', '.join(runners)})")
        return self

    def harness_runners(self) -> dict[str, RunnerConfig]:
        """Every harness of the config as its runner: ``[harnesses.<name>]`` over ``[runner]``, or ``[runner]``
        alone under the name ``default``."""
        if not self.harnesses:
            return {DEFAULT_HARNESS: self.runner}
        base = self.runner.model_dump(exclude_unset=True)
        runners: dict[str, RunnerConfig] = {}
        for name, keys in self.harnesses.items():
            try:
                runners[name] = RunnerConfig.model_validate({**base, **keys})
            except ValidationError as exc:
                raise ValueError(f"[harnesses.{name}]: {describe_errors(exc)}") from None
        return runners

    def resolve(self, path: str | None) -> Path | None:
        """A path from the config, made absolute relative to the config file's folder."""
        if path is None:
            return None
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    @property
    def run_dir(self) -> Path:
        resolved = self.resolve(self.run.dir)
        assert resolved is not None
        return resolved

    @property
    def store_url(self) -> str:
        return self.store.url or f"sqlite:///{self.run_dir / 'store.db'}"


#: Keys whose relative path is resolved against the config's folder when used (``HarnessConfig.resolve``).
RELATIVE_TO_CONFIG = (("run", "dir"), ("tasks", "train"), ("tasks", "eval"), ("rewards", "judge", "rubric_file"))


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None, *,
                gateway_alone: bool = False) -> HarnessConfig:
    """Read and validate a TOML config; ``overrides`` (the command line's) are deep-merged over the file.

    ``path`` None: every default (``harnessrl gateway`` given flags only). ``gateway_alone``: the gateway
    serves by itself (``harnessrl gateway``) on its own default port and render mode; a run's stack
    (``train``/``collect``) defaults them to a free port and gateway-side rendering. A relative path in the
    file is relative to the file's folder; one in ``overrides`` to the working directory, as a shell's is.
    """
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            with path.open("rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    given = copy.deepcopy(overrides or {})
    base = path.parent.resolve() if path is not None else Path.cwd()
    runner_kind = _get(given, ("runner", "kind"), _get(data, ("runner", "kind"), "local"))
    _absolute_paths(data, base, runner_kind)
    _absolute_paths(given, Path.cwd(), runner_kind)
    for key in RELATIVE_TO_CONFIG:  # resolved when used, against base_dir: absolute now, from here
        value = _get(given, key, None)
        if isinstance(value, str):
            _put(given, key, str((Path.cwd() / Path(value).expanduser()).resolve()))
    merge(data, given)
    data.setdefault("gateway", {})
    if not gateway_alone and isinstance(data["gateway"], dict):
        data["gateway"].setdefault("port", 0)
        data["gateway"].setdefault("render_mode", "gateway")
    try:
        return HarnessConfig.model_validate({**data, "base_dir": base})
    except ValidationError as exc:
        raise ConfigError(f"invalid config {path or '(command-line flags)'}:\n{describe_errors(exc)}") from None


def parse_setting(text: str) -> dict[str, Any]:
    """``--set section.key=VALUE`` as the nested table it stands for: ``{"section": {"key": VALUE}}``.

    VALUE is read as a TOML value when it is one (``8``, ``true``, ``["a", "b"]``, ``"quoted"``), else kept as
    the string it is (``runs/x``, ``podman``), so a path or a name needs no quotes. The key is checked later,
    by the config model, which names an unknown one with the nearest known keys.
    """
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted config key, e.g. "
                          "--set training.lora.r=8 or --set runner.container.engine=podman")
    try:
        value: Any = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return at_key(".".join(p.strip() for p in parts), value)


def at_key(key: str, value: Any) -> dict[str, Any]:
    """``value`` at a dotted key: ``at_key("training.lora.r", 8)`` is ``{"training": {"lora": {"r": 8}}}``."""
    table: dict[str, Any] = {}
    _put(table, tuple(key.split(".")), value)
    return table


def merge(into: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``into`` table by table (``training.lora.r`` keeps ``training.lora.alpha``)."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def _get(data: dict[str, Any], key: tuple[str, ...], default: Any) -> Any:
    for part in key:
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def _put(data: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    for part in key[:-1]:
        data = data.setdefault(part, {})
    data[key[-1]] = value


def _absolute_paths(data: dict[str, Any], base: Path, runner_kind: str) -> None:
    """The file arguments and folders a run launches with, made absolute against ``base`` (in place)."""
    runner = data.get("runner", {})
    local = runner_kind == "local"  # a Kubernetes command names paths inside the pod
    for section, key in (("runner", "command"), ("rewards", "verifier")):
        argv = _get(data, (section, key), None)
        if isinstance(argv, list) and (local or section != "runner"):
            data[section][key] = _absolute_files(argv, base)
    for harness in (data.get("harnesses") or {}).values():  # [harnesses.<name>]: paths as [runner]'s
        if not isinstance(harness, dict) or harness.get("kind", runner_kind) != "local":
            continue
        if isinstance(harness.get("command"), list):
            harness["command"] = _absolute_files(harness["command"], base)
        if isinstance(harness.get("sandbox_read_only"), list):
            harness["sandbox_read_only"] = [str((base / str(p)).resolve()) for p in harness["sandbox_read_only"]]
    if not isinstance(runner, dict):
        return
    container = runner.get("container", {})
    if local and isinstance(container, dict) and isinstance(container.get("mounts"), list):
        container["mounts"] = [str((base / str(p)).resolve()) for p in container["mounts"]]
    if local and isinstance(runner.get("sandbox_read_only"), list):  # folders beside the config file
        runner["sandbox_read_only"] = [str((base / str(p)).resolve()) for p in runner["sandbox_read_only"]]
    k8s = runner.get("kubernetes", {})
    if isinstance(k8s, dict) and isinstance(k8s.get("job_template_file"), str):
        k8s["job_template_file"] = str((base / k8s["job_template_file"]).resolve())


def _absolute_files(argv: list[Any], base: Path) -> list[Any]:
    """Arguments naming files next to the config become absolute: attempts run in their own folders."""
    out = []
    for arg in argv:
        if isinstance(arg, str) and Path(arg).is_absolute() and Path(arg).is_file():
            out.append(os.path.normpath(arg))  # "/x/../y" too; symlinks kept (a venv's python must stay itself)
            continue
        candidate = base / str(arg)
        is_file = isinstance(arg, str) and candidate.is_file()
        out.append(str(candidate.resolve()) if is_file else arg)  # no ".." left: a sandbox mounts only its folder
    return out
