"""``harnessrl gateway`` tunes the garbage collector for serving (gateway/serving_gc.py), and only it.

The command's process: startup frozen, the young threshold raised, the older two as CPython sets them; its
admin status says so. A gateway inside another process (the in-process server of ``harnessrl train``, these
tests) leaves the collector as it found it.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import httpx
from test_crash_safety import ADMIN, free_port, start

from harnessrl.gateway.serving_gc import GEN0_THRESHOLD


def test_the_gateway_command_serves_with_its_gc_settings(tmp_path: Path, engine_server) -> None:  # noqa: ANN001
    port = free_port()
    proc = start(tmp_path / "gc.db", engine_server.url, port)
    base, admin = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {ADMIN}"}
    try:
        before = httpx.get(f"{base}/admin/status", headers=admin).json()["gc"]
        assert before["threshold"] == [GEN0_THRESHOLD, *gc.get_threshold()[1:]]
        assert before["frozen"] > 10_000  # the modules, classes and functions startup built
        r = httpx.post(f"{base}/admin/rollouts", json={"task_id": "t", "group_id": "g"}, headers=admin).json()
        for _ in range(40):
            answer = httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert answer.status_code == 200, answer.text
        after = httpx.get(f"{base}/admin/status", headers=admin).json()["gc"]
        assert after["threshold"] == before["threshold"] and after["frozen"] > 10_000
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_gateway_in_another_process_leaves_the_collector_alone(make_gateway) -> None:  # noqa: ANN001
    before = gc.get_threshold(), gc.get_freeze_count()
    h = make_gateway()
    r = h.rollout()
    answer = httpx.post(f"{r.base_url}/chat/completions", headers={"Authorization": f"Bearer {r.api_key}"},
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 200, answer.text
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_tuning_keeps_collecting_cycles() -> None:
    """In a fresh interpreter: a cycle made after the freeze is freed by the raised threshold's collections."""
    code = (
        "import gc, weakref\n"
        "from harnessrl.gateway.serving_gc import GEN0_THRESHOLD, tune_for_serving\n"
        "tune_for_serving()\n"
        "class Node: pass\n"
        "a = Node(); a.me = a; ref = weakref.ref(a); del a\n"
        "junk = [[] for _ in range(2 * GEN0_THRESHOLD)]\n"
        "print(ref() is None, gc.get_freeze_count() > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]
