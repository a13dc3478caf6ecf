"""The dashboard's pages over a real store, through HTTP (Starlette's test client): what each page shows
matches the store, filters and paging work, untrusted text is escaped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from harnessrl.inspection.rollout_pages import Filters, rollout_page
from harnessrl.store import Store
from harnessrl.types import RolloutStatus
from harnessrl.ui import dashboard_app

from .fixture_data import XSS, Fixture


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-rollout="([^"]+)"', html)


def test_runs_page_links_each_run(client: TestClient, fx: Fixture) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert f'href="/runs/{fx.run_id}"' in r.text


def test_run_page_curves_versions_steps_and_rollouts(client: TestClient, fx: Fixture, store: Store) -> None:
    html = client.get(f"/runs/{fx.run_id}").text
    reward_svg = html[html.index('id="reward-chart"'):html.index('class="metric-chart"')]
    train = re.search(r'<polyline points="([^"]+)"[^>]*data-series="train', reward_svg)
    held = re.search(r'<polyline points="([^"]+)"[^>]*data-series="held-out', reward_svg)
    assert train and len(train.group(1).split()) == 2  # two steps in events.jsonl
    assert held and len(held.group(1).split()) == 2  # evaluations at v0 and v2
    assert "held-out (per evaluation): step 2 = 0.6" in reward_svg
    for metric in ("loss", "clip_fraction", "approx_kl"):
        assert f'data-series="{metric}"' in html
    versions = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td><code>", html)
    assert versions == [(str(v.version), str(v.metadata["step"])) for v in store.list_policy_versions(fx.run_id)]
    assert rows(html) == [r.id for r in store.list_rollouts(run_id=fx.run_id)]
    # the reward column shows each rollout's final reward
    for rid, shown in re.findall(r'<tr data-rollout="([^"]+)">.*?<td class="num reward"[^>]*>([^<]*)</td>', html, re.S):
        final = [w.value for w in store.get_rewards(rid) if w.name == "final"]
        assert float(shown) == pytest.approx(final[-1])


def test_filters_and_bad_values(client: TestClient, fx: Fixture, store: Store) -> None:
    failed = rows(client.get("/rollouts", params={"status": "failed"}).text)
    assert failed == [r.id for r in store.list_rollouts(status=RolloutStatus.FAILED)] and len(failed) == 1
    assert len(rows(client.get(f"/runs/{fx.run_id}", params={"task": "task-1"}).text)) == 2
    assert len(rows(client.get("/rollouts", params={"step": "1", "failure": "agent"}).text)) == 0
    bad = client.get("/rollouts", params={"step": "abc", "status": "nope"})
    assert bad.status_code == 200 and "ignored step=" in bad.text and "ignored status=" in bad.text
    assert len(rows(bad.text)) == len(fx.rollouts)


def test_paging_follows_the_store(store: Store, fx: Fixture) -> None:
    seen: list[str] = []
    page = 0
    while True:
        got, more = rollout_page(store, Filters(run=fx.run_id, page=page), page_size=3)
        seen += [g.rollout.id for g in got]
        assert all(g.calls == len(store.get_calls(g.rollout.id)) for g in got)
        if not more:
            break
        page += 1
    assert seen == fx.rollouts and page == 2


def test_rollout_page_calls_samples_rewards_logs(client: TestClient, fx: Fixture, store: Store) -> None:
    html = client.get(f"/rollouts/{fx.rich}").text
    calls = re.findall(r'<tr data-call="(\d+)">', html)
    assert calls == [str(c.index) for c in store.get_calls(fx.rich)]
    samples = re.findall(r'<tr data-sample="\d+"><td>\d+</td><td>(\w+)</td><td>([^<]*)</td>', html)
    assert samples == [("merged", ""), ("split", "prefix broken at token 2 of 11")]
    assert "excluded.status_error=1" in html
    assert re.search(r"<td>format</td><td class=\"num\">0.25</td><td>1</td>", html)
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html  # the logs, escaped


def test_call_page_tokens_masks_logprobs_and_fidelity(client: TestClient, fx: Fixture, store: Store) -> None:
    call = store.get_call(fx.rich, 1)
    html = client.get(f"/rollouts/{fx.rich}/calls/1").text
    assert "<b>extended</b>" in html and "reused 8 tokens of call 0" in html
    prompt = re.findall(r'title="prompt token (\d+)"', html)
    assert [int(t) for t in prompt] == call.prompt_token_ids
    completion = re.findall(r'<span class="tok (m\d) (lp\w)" data-id="(\d+)" data-logprob="([^"]*)"', html)
    assert [int(c[2]) for c in completion] == call.completion_token_ids
    assert [float(c[3]) for c in completion] == pytest.approx(call.completion_logprobs, abs=1e-4)
    assert {c[0] for c in completion} == {"m1"}  # merged into sample 0: every completion token trained
    assert [c[1] for c in completion] == ["lp0", "lp4"]  # p = e^-3 and e^-0.1
    assert "sample 0 (merged)" in html
    errored = client.get(f"/rollouts/{fx.rich}/calls/3").text
    assert "not trained: call error (engine said no)" in errored
    page = client.get(f"/rollouts/{fx.rich}").text
    assert re.search(r'<table id="refusals">.*data-refused="3".*<td class="error">engine said no</td>', page, re.S)


def test_untrusted_text_is_escaped_everywhere(client: TestClient, fx: Fixture) -> None:
    for path in ("/", f"/runs/{fx.run_id}", "/rollouts", f"/rollouts/{fx.rich}", f"/rollouts/{fx.rich}/calls/0"):
        r = client.get(path)
        assert r.status_code == 200
        assert XSS not in r.text and "<img src=x" not in r.text, path
        assert "default-src 'self'" in r.headers["content-security-policy"]
    assert "&lt;img src=x onerror=" in client.get(f"/rollouts/{fx.rich}/calls/0").text


def test_unknown_things_are_404(client: TestClient, fx: Fixture) -> None:
    for path in ("/runs/nope", "/rollouts/nope", f"/rollouts/{fx.rich}/calls/99", f"/rollouts/{fx.rich}/calls/x"):
        assert client.get(path).status_code == 404, path
    page = client.get("/rollouts/<i onmouseover=alert(1)>x")
    assert "does not exist" in page.text and "<i onmouseover" not in page.text


def test_assets_are_local(client: TestClient) -> None:
    html = client.get("/").text
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert client.get("/static/ui.css").status_code == 200
    assert client.get("/static/ui.js").status_code == 200


def test_tokens_decoded_with_the_runs_tokenizer(store: Store, fx: Fixture, store_url: str) -> None:
    from harnessrl.models import load_tokenizer

    tok = load_tokenizer("tiny")
    with TestClient(dashboard_app(store, store_url=store_url)) as c:  # the run's engine.model = "tiny"
        html = c.get(f"/rollouts/{fx.rich}/calls/0").text
    call = store.get_call(fx.rich, 0)
    shown = re.findall(r'data-id="\d+" data-logprob="[^"]*" title="[^"]*">([^<]*)</span>', html)
    import html as htmlmod

    assert [htmlmod.unescape(s) for s in shown] == [tok.decode([t]) for t in call.completion_token_ids]
    assert "Decoded with the tokenizer of <code>tiny</code>" in html


def test_pages_on_postgres(tmp_path: Path) -> None:
    """The same pages over the PostgreSQL driver (skipped without HARNESSRL_TEST_POSTGRES_URL)."""
    import os
    import uuid

    from harnessrl.store import open_store

    from .fixture_data import build

    base = os.environ.get("HARNESSRL_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("no PostgreSQL server: set HARNESSRL_TEST_POSTGRES_URL (eval \"$(bash scripts/postgres.sh)\")")
    import psycopg

    schema = f"test_ui_{uuid.uuid4().hex[:10]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    pg = open_store(url)
    try:
        fx = build(pg, tmp_path)
        with TestClient(dashboard_app(pg, store_url=url, tokenizer="none")) as c:
            assert rows(c.get(f"/runs/{fx.run_id}").text) == fx.rollouts
            assert rows(c.get("/rollouts", params={"task": "task-1", "run": fx.run_id}).text) == [
                r.id for r in pg.list_rollouts(task_id="task-1")]
            html = c.get(f"/rollouts/{fx.rich}").text
            assert re.findall(r'<tr data-call="(\d+)">', html) == ["0", "1", "2", "3"]
            assert "prefix broken at token 2 of 11" in html
            assert c.get(f"/rollouts/{fx.rich}/calls/1").status_code == 200
    finally:
        pg.close()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
