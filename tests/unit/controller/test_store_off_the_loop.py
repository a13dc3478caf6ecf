"""The controller never calls the synchronous store on its event loop (docs/architecture.md, "The store and
the event loop"): a step's collection (with dynamic sampling and an attempt that crashes), its training and
publishing, and an evaluation, with a store that records calls made on a loop's thread.

Real parts: a gateway on loopback over a fake engine, local harness processes that post their reward to
the gateway, the controller's own store on the same SQLite file. The trainer is a stand-in (no model).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402
from fakes.loop_guard_store import LoopGuardStore  # noqa: E402

from harnessrl.config import HarnessConfig  # noqa: E402
from harnessrl.controller import Controller  # noqa: E402
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer  # noqa: E402
from harnessrl.store import open_store  # noqa: E402
from harnessrl.tasks import load_tasks  # noqa: E402
from harnessrl.types import RolloutStatus  # noqa: E402

HARNESS = """
import json, os, sys, urllib.request
task = json.loads(os.environ["HARNESSRL_TASK_INPUT"])
if task.get("crash"):
    sys.exit(3)
req = urllib.request.Request(os.environ["HARNESSRL_REWARD_URL"], method="POST",
                             data=json.dumps({"value": task["value"]}).encode(),
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=30).read()
"""


class StandInTrainer:
    """What ``train_step`` drives, without a model: a step, a publish, a checkpoint folder."""

    policy_version = 0
    metrics = None

    def step(self, batch: object) -> dict[str, float]:
        return {"loss": 0.0}

    def publish(self) -> int:
        self.policy_version += 1
        return self.policy_version

    def save_checkpoint(self, path: Path) -> None:
        Path(path).mkdir(parents=True)


def test_a_step_and_an_evaluation_call_the_store_only_from_worker_threads(tmp_path: Path) -> None:
    (tmp_path / "harness.py").write_text(HARNESS)
    # t0 varies within its group only through the crash; t1..t3 give each attempt the same value
    train = [{"id": f"t{i}", "input": {"value": float(i % 2)}} for i in range(4)]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(t) for t in train))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"id": "e0", "input": {"value": 1.0}}) + "\n"
                                         + json.dumps({"id": "e1", "input": {"crash": True, "value": 0}}))
    config = HarnessConfig.model_validate({
        "run": {"dir": str(tmp_path / "run"), "tasks_per_step": 2, "attempts_per_task": 2,
                "dynamic_sampling": True, "max_retries": 0},
        "tasks": {"train": "train.jsonl", "eval": "eval.jsonl"},
        "runner": {"command": [sys.executable, str(tmp_path / "harness.py")], "sandbox": "none",
                   "concurrency": 4, "timeout_s": 60},
        "rewards": {"exit_code_map": {"0": 0.0}, "combine": "sum"},
        "base_dir": tmp_path,
    })
    config.run_dir.mkdir(parents=True)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    gateway_store, controller_store = open_store(db), open_store(db)
    run_id = gateway_store.create_run("r", {}, run_id="run-1").id
    engine = EngineServer(FakeEngine()).start()
    server = GatewayServer(Gateway(gateway_store, GatewayConfig(port=0, engines=[engine.url],
                                                                admin_token="admin-secret"))).start()
    guard = LoopGuardStore(controller_store)
    stack = SimpleNamespace(store=guard, gateway_url=server.url, admin_token="admin-secret",
                            trainer=StandInTrainer(), gateway=None, engine=None)
    tasks = load_tasks(config, run_id)

    async def main() -> tuple:
        async with Controller(config, stack, run_id, tasks) as ctl:  # type: ignore[arg-type]
            report = await ctl.train_step(1)
            evaluation = await ctl.evaluate(1)
        return report, evaluation

    try:
        report, evaluation = asyncio.run(main())
        states = list(server.gateway.registry._states.values())
    finally:
        server.stop()
        engine.stop()
    # the controller closed them in the store and told the gateway: none stays open in its memory
    assert len(states) >= 6 and all(s.closed for s in states)
    assert report.rollouts >= 4 and report.infra == 0
    assert (config.run_dir / "checkpoints" / "step_000001").is_dir()
    assert [v.version for v in controller_store.list_policy_versions()] == [1]
    assert evaluation.rewards == {"e0": 1.0, "e1": 0.0}  # e1 crashed: scored by its exit code
    assert all(r.status.terminal for r in controller_store.list_rollouts(run_id=run_id, limit=100))
    assert controller_store.list_rollouts(run_id=run_id, status=RolloutStatus.RUNNING, limit=1) == []
    assert guard.on_loop == [], f"store called on the controller's event loop: {guard.on_loop}"
    gateway_store.close()
    controller_store.close()
