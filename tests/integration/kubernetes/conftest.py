"""The ``cluster`` fixture: kmock's Kubernetes emulator on loopback (see ``k8s_cluster.py``)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.test_utils
import aiohttp.web
import kmock
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))  # k8s_cluster importable from the tests

from k8s_cluster import Cluster, FaultyCluster


class _QuickStop(aiohttp.test_utils.RawTestServer):
    """Stops in 0.2 s: watch handlers wait on kmock's event bus and would hold shutdown for 60 s."""

    async def _make_runner(self, debug: bool = True, **kwargs: Any) -> aiohttp.web.ServerRunner:
        server = aiohttp.web.Server(self._handler, loop=self._loop, debug=debug, **kwargs)
        return aiohttp.web.ServerRunner(server, debug=debug, shutdown_timeout=0.2, **kwargs)


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with FaultyCluster() as km, kmock.Server(km, server_cls=_QuickStop) as server:
        for resource in (
            "batch/v1/jobs", "v1/pods", "v1/secrets", "v1/configmaps", "networking.k8s.io/v1/networkpolicies"
        ):
            km.resources[resource] = {}  # listable even while empty, as on a cluster
        async with aiohttp.ClientSession() as http:
            yield Cluster(km, str(server.url).rstrip("/"), http)
