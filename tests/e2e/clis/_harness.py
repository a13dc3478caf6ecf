"""What the coding-CLI tests share: a default gateway in front of a scripted engine, attempts of an
``examples/<cli>`` task run the way the controller runs them (real local runner, the example's own
``run.sh`` and verifier, rewards and close), and one training step of the tiny model on the recorded
group.

The gateway is ``GatewayConfig()`` with only the engine URL, port and admin token set: what a user gets
from ``harnessrl gateway --engine URL``. The CLIs come from ``scripts/clis.sh`` (``.clis/``); a test
whose CLI is missing is skipped with that command in its reason.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.rewards import close_rollout, score_attempt
from harnessrl.rewards.config import RewardConfig
from harnessrl.runners import make_attempt_spec, make_runner
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.spec import TaskAssets
from harnessrl.store import Store, open_store
from harnessrl.types import Call, Rollout, RolloutStatus

ROOT = Path(__file__).resolve().parents[3]
CLIS_BIN = (ROOT / ".clis").resolve() / "node_modules" / ".bin"  # real path: a sandbox binds that
EXAMPLES = ROOT / "examples"
OPENHANDS_VENV = ROOT / ".venv-openhands"  # scripts/openhands.sh; its base-python links to the interpreter
AIDER_VENV = ROOT / ".venv-aider"  # scripts/aider.sh; the same link

sys.path.insert(0, str(ROOT / "tests"))  # `fakes` importable
from fakes.cli_engine import CliScriptEngine, CliTokenScriptEngine  # noqa: E402
from fakes.fake_engine import EngineServer  # noqa: E402


def require_cli(name: str) -> None:
    """Skip the calling module when ``scripts/clis.sh`` has not installed ``name``."""
    if not (CLIS_BIN / name).exists():
        pytest.skip(f"{name} is not installed: run `bash scripts/clis.sh` (pinned CLIs from npm into .clis/)",
                    allow_module_level=True)


def require_openhands() -> None:
    """Skip the calling module when ``scripts/openhands.sh`` has not made OpenHands' venv."""
    if not (OPENHANDS_VENV / "pins").exists():
        pytest.skip("OpenHands is not installed: run `bash scripts/openhands.sh` (openhands-sdk and -tools into "
                    ".venv-openhands, Python >= 3.12)", allow_module_level=True)


def require_aider() -> None:
    """Skip the calling module when ``scripts/aider.sh`` has not made aider's venv."""
    if not (AIDER_VENV / "pins").exists():
        pytest.skip("aider is not installed: run `bash scripts/aider.sh` (aider-chat into .venv-aider, Python "
                    "3.10-3.12)", allow_module_level=True)


def sandbox_read_only(*paths: Path) -> dict[str, Any]:
    """``[runner] sandbox_read_only`` where this checkout's runner has a sandbox (the CLIs live in .clis)."""
    return {"sandbox_read_only": [str(p) for p in paths]} if "sandbox_read_only" in RunnerConfig.model_fields else {}


@dataclass
class Attempt:
    rollout: Rollout
    workdir: Path
    calls: list[Call]
    rewards: dict[str, float]
    logs: str


class Stack:
    """Store, scripted engine and default gateway on loopback, and attempts of one example's task."""

    def __init__(self, tmp: Path, render_mode: str = "engine", engine: CliScriptEngine | None = None,
                 **gateway: Any) -> None:
        """``render_mode="gateway"``: the gateway renders prompts with the tiny model's tokenizer (the
        default of ``harnessrl train``); else ``GatewayConfig()``'s own default, the engine renders.
        ``engine``: another scripted engine than the tool-calling one (aider's text script); ``gateway``:
        settings an example's config adds to the default gateway (aider's ``pinned_sampling``)."""
        self.tmp = tmp
        self.store: Store = open_store(f"sqlite:///{tmp / 'store.db'}")
        extra: dict[str, Any] = dict(gateway)
        if render_mode == "gateway":
            from harnessrl.gateway.render import RenderConfig
            from harnessrl.models.tiny import tiny_tokenizer

            self.engine: CliScriptEngine = CliTokenScriptEngine([{"text": "done"}], tiny_tokenizer(), model="tiny")
            extra.update(render_mode="gateway", render=RenderConfig(tokenizer="tiny"))
        else:
            self.engine = engine or CliScriptEngine([{"text": "done"}], model="policy")
        self.engine_server = EngineServer(self.engine).start()
        config = GatewayConfig(port=0, engines=[self.engine_server.url], admin_token="admin-secret", **extra)
        self.gateway = GatewayServer(Gateway(self.store, config)).start()
        self.admin = httpx.Client(base_url=self.gateway.url, timeout=30,
                                  headers={"Authorization": "Bearer admin-secret"})

    def close(self) -> None:
        self.admin.close()
        self.gateway.stop()
        self.engine_server.stop()
        self.store.close()

    def attempt(self, example: str, script: list[dict[str, Any]], group_id: str, *,
                timeout_s: float = 300, env: dict[str, str] | None = None, sandbox: bool = True,
                read_only: tuple[Path, ...] = (CLIS_BIN.parents[1],)) -> Attempt:
        """One attempt of ``examples/<example>``'s task with ``script`` played by the engine (``env``: more
        attempt environment; ``sandbox=False``: the attempt runs without the runner's sandbox; ``read_only``:
        what the sandbox shows besides the system, harnessrl and the example: the CLIs by default)."""
        tasks_dir = EXAMPLES / example / "tasks"
        record = json.loads((tasks_dir / "train.jsonl").read_text().splitlines()[0])
        r = self.admin.post("/admin/rollouts", json={"task_id": record["id"], "group_id": group_id,
                                                      "input": record["input"]})
        assert r.status_code == 201, r.text
        rid, key = r.json()["rollout_id"], r.json()["api_key"]
        workroot = self.tmp / "attempts"
        runner_config = RunnerConfig(command=["bash", str(EXAMPLES / example / "run.sh")], timeout_s=timeout_s,
                                     keep_workdirs="all", env={"CLIS_BIN": str(CLIS_BIN), **(env or {})},
                                     **(sandbox_read_only(*read_only) if sandbox else {"sandbox": "none"}))
        rewards_config = RewardConfig(verifier=[sys.executable, str(EXAMPLES / example / "verify.py")])
        spec = make_attempt_spec(runner_config, rollout_id=rid, task_id=record["id"], task_input=record["input"],
                                 gateway_url=self.gateway.url, api_key=key,
                                 assets=TaskAssets.from_record(record, tasks_dir))
        self.engine.script = script
        self.engine.cwd = str(workroot / rid / "workspace")

        async def run() -> tuple[Any, Rollout]:
            runner = make_runner(runner_config, workroot)
            self.store.transition_rollout(rid, RolloutStatus.RUNNING)
            result = await runner.run(spec)
            outcome = await score_attempt(spec, result, self.store, rewards_config)
            rollout = await asyncio.to_thread(close_rollout, self.store, result, outcome)
            return result, rollout

        result, rollout = asyncio.run(run())
        return Attempt(rollout=rollout, workdir=Path(result.workdir), calls=self.store.get_calls(rid),
                       rewards={x.name: x.value for x in self.store.get_rewards(rid)}, logs=result.logs())


def train_one_step(store: Store, rollouts: list[Rollout], tmp: Path) -> dict[str, Any]:
    """Samples and advantages from the recorded group, then one LoRA step of the tiny model on them (the
    scripted engine's token ids are all below the tiny vocabulary's 476); returns the step's metrics."""
    from harnessrl.models.tiny import tiny_model
    from harnessrl.training.config import LoraConfig, TrainingConfig
    from harnessrl.training.train_batch import batch_from_store
    from harnessrl.training.trainer import Trainer

    config = TrainingConfig(lr=1e-3, device="cpu", lora=LoraConfig(r=4, alpha=8))
    batch = batch_from_store(store, rollouts, config)
    assert batch.samples, f"no trainable samples: {dict(batch.counts)}"
    model, _ = tiny_model()
    trainer = Trainer(model, config, run_dir=tmp / "train")
    metrics = trainer.step(batch)
    lora_b = [p for name, p in trainer.model.named_parameters() if "lora_B" in name]
    metrics["lora_b_max"] = max(float(p.detach().abs().max()) for p in lora_b)
    metrics["advantages"] = dict(batch.advantages)
    return metrics


def check_recorded(calls: list[Call]) -> None:
    """Every agent call recorded OK with prompt and completion token ids, logprobs and a fidelity verdict."""
    assert calls, "nothing recorded"
    for c in calls:
        assert c.status.value == "ok", (c.index, c.status, c.error)
        assert c.prompt_token_ids and c.completion_token_ids, c.index
        assert len(c.choices[0].logprobs) == len(c.completion_token_ids)
        assert c.fidelity is not None


def edit_and_train(stack: Stack, example: str, script: Any, tmp: Path, agent_calls: int,
                   **attempt: Any) -> tuple[Attempt, Attempt]:
    """The check every CLI test makes: ``script(new_line)`` makes the CLI edit greet.py's return line
    (``attempt``: more keywords of ``Stack.attempt``, e.g. what the sandbox shows).

    A right fix and a wrong one, as a group of two attempts: both run the CLI to its end (exit 0) with its
    own tools, the file changed, every call recorded with token ids, logprobs and a fidelity verdict, the
    agent's later calls token-exact extensions of the earlier ones (the CLI sends its history back as it
    got it), the verifier scores 1 and 0, and one training step on the group has a non-zero gradient.
    """
    right, wrong = 'return f"Hello, {name}!"', 'return f"Hello {name}"'
    good = stack.attempt(example, script(right), f"{example}-group", **attempt)
    assert good.rollout.exit_code == 0, good.logs
    assert right in (good.workdir / "greet.py").read_text(), good.logs
    assert good.rewards["verifier"] == 1.0, good.logs
    check_recorded(good.calls)
    agent = [c for c in good.calls if c.request.get("tools")]
    assert len(agent) == agent_calls, [(c.index, c.api) for c in good.calls]
    fidelity = [(c.fidelity.value if c.fidelity else None, c.fidelity_reason) for c in agent]
    assert [f for f, _ in fidelity[1:]] == ["extended"] * (agent_calls - 1), fidelity

    bad = stack.attempt(example, script(wrong), f"{example}-group", **attempt)
    assert bad.rollout.exit_code == 0, bad.logs
    assert wrong in (bad.workdir / "greet.py").read_text(), bad.logs
    assert bad.rewards["verifier"] == 0.0, bad.logs
    check_recorded(bad.calls)

    metrics = train_one_step(stack.store, [good.rollout, bad.rollout], tmp)
    adv = metrics["advantages"]
    assert adv[good.rollout.id] > 0 > adv[bad.rollout.id], adv
    assert metrics["samples/rollouts"] == 2, metrics
    assert metrics["grad_norm"] > 0 and metrics["lora_b_max"] > 0, metrics
    return good, bad
