"""The warm pool (``[runner.container] pool_size``): an attempt takes a container started ahead of time, reaches
the gateway and its task input through it, is graded there, and no pooled container outlives the runner."""

from __future__ import annotations

import asyncio
import http.server
import sys
import threading
from pathlib import Path

import pytest

from harnessrl.environments.engine import LABEL_ROLLOUT, LABEL_RUN, Engine
from harnessrl.harbor.load import load_harbor_tasks
from harnessrl.rewards.container_grading import grade_attempt
from harnessrl.runners import RunnerConfig, make_attempt_spec, make_runner
from harnessrl.runners.container import ContainerRunner
from harnessrl.types import RolloutStatus

sys.path.insert(0, str(Path(__file__).parent))
from conftest import harbor_task  # noqa: E402

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

HARNESS = ("import json, os, urllib.request\n"
           "print(urllib.request.urlopen(os.environ['OPENAI_BASE_URL'] + '/models', timeout=30).read().decode())\n"
           "print(json.load(open(os.environ['HARNESSRL_TASK_INPUT_FILE']))['n'])\n"
           "open('answer.txt', 'w').write(open('data.txt').read())\n")


class Gateway(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def labels_of(engine: Engine, run_id: str) -> list[str]:
    done = asyncio.run(engine.run("ps", "-a", "--filter", f"label={LABEL_RUN}={run_id}", "--format",
                                  f'{{{{index .Labels "{LABEL_ROLLOUT}"}}}}'))
    return done.text.split()


def test_pooled_containers_serve_one_attempt_each_and_go_with_the_runner(engine: Engine, tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (task,) = load_harbor_tasks(harbor_task(tmp_path, "pool"), tmp_path / "cache", runner_timeout_s=60,
                                verifier_timeout_s=60, container=True)
    cfg = RunnerConfig.model_validate({
        "environment": "container", "command": [sys.executable, "-c", HARNESS], "timeout_s": 60,
        "task_input_file": True, "container": {"pool_size": 1}})
    seen: list[list[str]] = []

    async def main() -> list[tuple[str, float | None, str]]:
        runner = make_runner(cfg, tmp_path / "attempts", run_id="pool")
        assert isinstance(runner, ContainerRunner) and runner.pool is not None
        got = []
        for i in range(3):
            spec = make_attempt_spec(cfg, rollout_id=f"warm-{i}", task_id=task.id, task_input={"n": i},
                                     gateway_url=f"http://127.0.0.1:{server.server_address[1]}", api_key="k",
                                     assets=task.assets)
            res = await runner.run(spec)
            assert res.status is RolloutStatus.SUCCEEDED, (res.reason, res.stderr)
            assert task.assets.environment is not None
            grade = await grade_attempt(res.box, task.assets.environment, timeout_s=60)
            await runner.release(res)
            got.append((res.stdout, grade.value, res.handle or ""))
            for _ in range(600):  # the refill runs in the background: wait for it, as a later attempt would
                if any(runner.pool._ready.values()):
                    break
                await asyncio.sleep(0.1)
            seen.append(await asyncio.to_thread(labels_of, engine, "pool"))
        hits, misses = runner.pool.hits, runner.pool.misses
        await runner.aclose()
        assert (hits, misses) == (2, 1)  # the first attempt found the pool empty
        return got

    try:
        got = asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()
    for i, (stdout, value, handle) in enumerate(got):
        assert stdout.split() == [f"/r/warm-{i}/v1/models", str(i)]  # its own route and its own task input
        assert value == 1.0
        assert ("hrl-pool-" in handle) == (i > 0)  # the first started cold, the others were pooled
    assert all(labels == ["pool"] for labels in seen)  # after each release: only the next one, unused
    assert labels_of(engine, "pool") == []  # aclose removed the pooled container nobody took
