"""Judge calls on the dashboard's rollout page and in `harnessrl show`: model, score, reason (escaped),
latency beside the rewards, and the judge's prompt and answer; a group's other rows point to the one prompt."""

from __future__ import annotations

import asyncio
import html
import subprocess
import sys
from pathlib import Path

from fakes.fake_engine import EngineServer
from starlette.testclient import TestClient

from harnessrl.rewards.config import JudgeConfig
from harnessrl.rewards.judge import Judge
from harnessrl.store import Store
from harnessrl.ui import dashboard_app

from .test_judge import record_attempt

XSS = "<script>alert(1)</script>"


def test_rollout_page_and_show_print_the_judge(judge_server: EngineServer, store: Store, tmp_path: Path) -> None:
    attempts = [record_attempt(store, tmp_path, a) for a in ("Shalo", f"Felo {XSS}")]

    async def run() -> None:
        judge = Judge(JudgeConfig(url=judge_server.url, mode="group"), url=judge_server.url, store=store)
        try:
            await judge.judge([judge.item(s, r, store) for s, r in attempts])
        finally:
            await judge.aclose()

    asyncio.run(run())
    second = attempts[1][0].rollout_id
    with TestClient(dashboard_app(store, tokenizer="none")) as client:
        page = client.get(f"/rollouts/{second}").text
    table = page[page.index('id="judge-calls"'):page.index("</table>", page.index('id="judge-calls"'))]
    assert "scripted-judge" in table and "group (attempt 1)" in table and "does not give the reference" in table
    prompt = page[page.index('id="judge-prompt"'):]
    assert "&lt;&lt;&lt;ATTEMPT B TRANSCRIPT" in prompt  # the group's prompt, found from position 0's row
    assert XSS not in page and html.escape(XSS)[:20] in page
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "show", second, "--db", f"sqlite:///{tmp_path}/store.db"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "judge calls" in out.stdout and "scripted-judge" in out.stdout and "does not give the reference" in out.stdout
