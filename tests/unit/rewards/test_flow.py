"""The controller's flow end to end against the real store: run, score, close, for every kind of harness.

This is the contract the controller relies on: whatever the harness does, each rollout ends in a legal
terminal state with the right failure kind, and only non-infra rollouts carry a ``final`` reward.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from harnessrl.rewards import RewardConfig, close_rollout, score_attempt
from harnessrl.runners import RunnerConfig, TaskAssets, make_attempt_spec, make_runner
from harnessrl.store import open_store
from harnessrl.types import FailureKind, RolloutStatus

PY = sys.executable

HARNESSES = {
    "solves": "import pathlib; pathlib.Path('answer.txt').write_text('42')",
    "crashes": "import pathlib; pathlib.Path('answer.txt').write_text('42'); raise SystemExit(1)",
    "hangs": "import time; time.sleep(60)",
    "tampers": "import pathlib; pathlib.Path('check.py').write_text('print(1.0)')",
    "floods": "import sys\nfor _ in range(2000): sys.stdout.write('y' * 4096)",
    "cancelled": "import time; time.sleep(60)",
}
VERIFIER = (
    "import pathlib; p = pathlib.Path('answer.txt'); print(float(p.exists() and p.read_text() == '42'))"
)


def test_every_harness_outcome_closes_its_rollout_legally(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'run.db'}")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "check.py").write_text(VERIFIER)
    (tmp_path / "h").mkdir()
    for name, code in HARNESSES.items():
        (tmp_path / "h" / f"{name}.py").write_text(code)
    runner_cfg = RunnerConfig(
        command=[PY], concurrency=3, timeout_s=2.0, kill_grace_s=0.2, max_log_bytes=1024
    )
    reward_cfg = RewardConfig(verifier=[PY, "check.py"], protected=["check.py"])
    runner = make_runner(runner_cfg, tmp_path / "attempts")

    async def one(name: str) -> tuple[str, float | None]:
        rollout = store.create_rollout(task_id=name, input={}, group_id="g", api_key_hash="h")
        spec = make_attempt_spec(
            runner_cfg.model_copy(update={"command": [PY, str(tmp_path / "h" / f"{name}.py")]}),
            rollout_id=rollout.id,
            task_id=name,
            task_input={"q": name},
            gateway_url="http://127.0.0.1:1",
            api_key="k",
            assets=TaskAssets(workspace=workspace),
            protected=tuple(reward_cfg.protected),
        )

        def started(handle: str) -> None:
            store.transition_rollout(rollout.id, RolloutStatus.RUNNING, runner_handle=handle)
            if name == "cancelled":
                asyncio.get_running_loop().call_later(0.3, asyncio.ensure_future, runner.cancel(rollout.id))

        result = await runner.run(spec, on_start=started)
        outcome = await score_attempt(spec, result, store, reward_cfg)
        close_rollout(store, result, outcome)
        await runner.release(result)
        return rollout.id, outcome.value

    async def main() -> dict[str, tuple[str, float | None]]:
        values = await asyncio.gather(*(one(name) for name in HARNESSES))
        return dict(zip(HARNESSES, values, strict=True))

    done = asyncio.run(main())
    expected = {
        "solves": (RolloutStatus.SUCCEEDED, None, 1.0),
        "crashes": (RolloutStatus.FAILED, FailureKind.AGENT, 1.0),  # crashed after answering: reward kept
        "hangs": (RolloutStatus.TIMED_OUT, FailureKind.AGENT, 0.0),
        "tampers": (RolloutStatus.FAILED, FailureKind.AGENT, 0.0),
        "floods": (RolloutStatus.SUCCEEDED, None, 0.0),
        "cancelled": (RolloutStatus.CANCELLED, FailureKind.INFRA, None),
    }
    for name, (status, kind, value) in expected.items():
        rollout_id, outcome_value = done[name]
        rollout = store.get_rollout(rollout_id)
        assert (rollout.status, rollout.failure_kind, outcome_value) == (status, kind, value), name
        finals = [r.value for r in store.get_rewards(rollout_id) if r.name == "final"]
        assert finals == ([] if value is None else [value]), name
        assert rollout.logs is not None and len(rollout.logs) < 4 * 1024 + 1000, name
        assert rollout.runner_handle.startswith("local:"), name
    assert "tampered" in store.get_rollout(done["tampers"][0]).error
    assert not (tmp_path / "attempts" / done["solves"][0]).exists()  # released: succeeded
    assert (tmp_path / "attempts" / done["hangs"][0]).exists()  # kept: failed
    store.close()
