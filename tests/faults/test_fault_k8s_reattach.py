"""Fault 5: the controller's host restarts while its attempts run as Kubernetes Jobs (emulated API).

The controller is a real process (``k8s_controller.py``) running step 1 with the Kubernetes runner against
kmock's Kubernetes API on loopback; it is SIGKILLed once both Jobs exist. One Job finishes while no
controller watches. The restarted controller must re-attach to both (no Job created again), score the one
that finished from its pod, and wait for the other.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import aiohttp.test_utils
import aiohttp.web
import orjson
import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "kubernetes"))

kmock = pytest.importorskip("kmock")
from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402
from faultkit import write_fault_config  # noqa: E402
from k8s_cluster import JOBS, NS, TEMPLATE, Cluster, FaultyCluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(300)]
HERE = Path(__file__).resolve().parent


class _QuickStop(aiohttp.test_utils.RawTestServer):
    async def _make_runner(self, debug: bool = True, **kwargs):  # noqa: ANN003, ANN202
        server = aiohttp.web.Server(self._handler, loop=self._loop, debug=debug, **kwargs)
        return aiohttp.web.ServerRunner(server, debug=debug, shutdown_timeout=0.2, **kwargs)


@pytest_asyncio.fixture
async def cluster():
    async with FaultyCluster() as km, kmock.Server(km, server_cls=_QuickStop) as server:
        for resource in ("batch/v1/jobs", "v1/pods", "v1/secrets", "networking.k8s.io/v1/networkpolicies"):
            km.resources[resource] = {}
        async with aiohttp.ClientSession() as http:
            yield Cluster(km, str(server.url).rstrip("/"), http)


async def controller(cfg: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, str(HERE / "k8s_controller.py"), str(cfg),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                start_new_session=True)


async def job_names(cluster: Cluster) -> list[str]:
    status, body = await cluster.get(JOBS)
    return sorted(j["metadata"]["name"] for j in body.get("items", [])) if status == 200 else []


async def test_a_restarted_controller_reattaches_to_its_jobs_and_reruns_nothing(cluster, tmp_path):
    engine = EngineServer(FakeEngine()).start()
    try:
        k8s = {"runner": {"kind": "kubernetes", "kubernetes": {
            "api_server": cluster.url, "namespace": NS, "api_retry_backoff_s": 0.01, "api_timeout_s": 5,
            "job_template": TEMPLATE}}}
        tasks = [{"id": "a", "input": {"question": "a"}}, {"id": "b", "input": {"question": "b"}}]
        cfg = write_fault_config(tmp_path, [engine.url], k8s, timeout_s=600, tasks=tasks)
        first = await controller(cfg)
        for _ in range(600):
            if len(await job_names(cluster)) == 2 or first.returncode is not None:
                break
            await asyncio.sleep(0.05)
        names = await job_names(cluster)
        if len(names) != 2:
            err = (await first.stderr.read()).decode() if first.returncode is not None else ""
            pytest.fail(f"the controller did not create two Jobs: {names} {err[-3000:]}")
        await asyncio.sleep(0.5)  # both attempts marked running in the store
        os.killpg(first.pid, signal.SIGKILL)  # the controller host goes away; the Jobs keep running
        await first.wait()

        done_while_away, still_running = names
        await cluster.add_pod(done_while_away, exit_code=0, log=b"finished while no controller watched\n")
        await cluster.finish(done_while_away, succeeded=1)

        second = await controller(cfg)
        await asyncio.sleep(3)  # it re-attaches; the finished one is scored, the other still runs
        assert second.returncode is None, (await second.stderr.read()).decode()[-3000:]
        await cluster.add_pod(still_running, exit_code=0, log=b"finished after the restart\n")
        await cluster.finish(still_running, succeeded=1)
        out, err = await asyncio.wait_for(second.communicate(), 120)
        assert second.returncode == 0, err.decode()[-3000:]
        result = orjson.loads(out.decode().strip().splitlines()[-1])

        assert len(cluster.requests("POST", JOBS)) == 2, "a Job was created again after the restart"
        assert len(result["all"]) == 2, result
        assert sorted(result["good"]) == sorted(result["all"]), result
        for status, kind, error in result["all"].values():
            assert status == "succeeded" and kind is None, (status, kind, error)
    finally:
        engine.stop()
