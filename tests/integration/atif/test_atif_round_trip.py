"""A rollout recorded through the gateway, exported as ATIF and imported into a fresh store: the same tokens.

The harness is the official openai client: a tool call, its result, a second user turn answered with two
choices, and a request the gateway refuses. What the trainer reads of the imported rollout (each call's
prompt and completion token IDs and logprobs, the samples built from them, the rewards) must equal what it
reads of the recorded one.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import jsonschema
import openai
import orjson
import pytest

from harnessrl.atif.read import import_atif
from harnessrl.atif.schema import WRITTEN_VERSION, Trajectory
from harnessrl.atif.write import export_atif
from harnessrl.cli import main
from harnessrl.gateway import GatewayServer
from harnessrl.store import Store, open_store
from harnessrl.training.samples import build_samples
from harnessrl.types import CallStatus, RolloutStatus

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
#: Fields that exist only from ATIF-v1.7: a v1.6 file must not carry them.
V17_ONLY = {"llm_call_count", "is_copied_context", "trajectory_id", "subagent_trajectories",
            "continued_trajectory_ref"}


def _record(server: GatewayServer) -> str:
    admin = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer admin-secret"}, timeout=30)
    d = admin.post("/admin/rollouts", json={"task_id": "t-atif", "group_id": "g-atif", "input": {"q": "hi"},
                                            "metadata": {"split": "train"}}).json()
    rid = d["rollout_id"]
    client = openai.OpenAI(base_url=d["base_url"], api_key=d["api_key"], max_retries=0)
    msgs: list = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Count files."}]
    first = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS, temperature=0.7)
    reply = first.choices[0].message
    assert reply.tool_calls, "the fake engine answers a tool call when tools are offered"
    msgs += [reply.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "42 files"}]
    second = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS, temperature=0.7)
    msgs += [second.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "And twice?"}]
    with pytest.raises(openai.BadRequestError):  # refused: recorded, but nothing was sampled
        client.chat.completions.create(model="gpt-4o", messages=[])
    client.chat.completions.create(model="gpt-4o", messages=msgs, n=2)
    key = {"Authorization": f"Bearer {d['api_key']}"}
    for body in ({"value": 0.75, "name": "reward"}, {"value": 0.5, "name": "format", "call_index": 1}):
        assert httpx.post(f"{server.url}/r/{rid}/reward", json=body, headers=key).status_code == 201
    for status in ("running", "succeeded"):
        admin.post(f"/admin/rollouts/{rid}/status", json={"status": status})
    admin.close()
    return rid


def _trainer_view(store: Store, rollout_id: str) -> tuple:
    """What training reads of a rollout: its sampled calls' tokens, its samples, rewards, identity."""
    r = store.get_rollout(rollout_id)
    calls = [c for c in store.get_calls(rollout_id) if c.status == CallStatus.OK and c.choices]
    position = {c.index: n for n, c in enumerate(calls)}
    samples = build_samples(store.get_calls(rollout_id), r.group_id).samples
    return (
        [(c.prompt_token_ids, [(ch.token_ids, ch.logprobs) for ch in c.choices], c.policy_version,
          c.sampling.get("temperature")) for c in calls],
        [(s.token_ids, s.loss_mask, s.behaviour_logprobs, s.temperatures, s.fidelity, s.fidelity_reason,
          s.call_spans, s.policy_versions) for s in samples],
        sorted((w.name, w.value, None if w.call_index is None else position[w.call_index])
               for w in store.get_rewards(rollout_id)),
        (r.task_id, r.group_id, r.step, r.policy_version, r.metadata.get("split"), r.status, r.failure_kind),
    )


def test_recorded_rollout_round_trips_through_atif(recorded: tuple[Store, GatewayServer], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    store, server = recorded
    rid = _record(server)
    assert [c.status for c in store.get_calls(rid)] == [CallStatus.OK, CallStatus.OK, CallStatus.REFUSED,
                                                        CallStatus.OK]
    out = tmp_path / "atif"
    db = f"sqlite:///{tmp_path / 'gw.db'}"
    assert main(["export", "--db", db, "--format", "atif", "--out", str(out)]) == 0
    assert "exported 1 ATIF trajectories" in capsys.readouterr().err
    (path,) = sorted(out.glob("*.json"))
    doc = orjson.loads(path.read_bytes())

    # valid ATIF: the spec's models (Harbor's validators included) and, independently, their JSON schema
    Trajectory.model_validate(doc)
    jsonschema.validate(doc, Trajectory.model_json_schema())
    assert doc["schema_version"] == WRITTEN_VERSION == "ATIF-v1.6"
    assert not V17_ONLY & ({*doc} | {k for s in doc["steps"] for k in s})
    assert doc["agent"]["tool_definitions"] == TOOLS

    # the conversation as steps: tool result as the observation of the step that asked for it
    assert [s["source"] for s in doc["steps"]] == ["system", "user", "agent", "agent", "user", "agent"]
    ask = doc["steps"][2]
    (tool_call,) = ask["tool_calls"]
    assert tool_call["function_name"] == "bash" and isinstance(tool_call["arguments"], dict)
    assert ask["observation"]["results"] == [{"source_call_id": tool_call["tool_call_id"], "content": "42 files"}]
    assert doc["steps"][4]["message"] == "And twice?"

    # each sampled call's exact tokens and logprobs in the spec's metrics fields
    sampled = [c for c in store.get_calls(rid) if c.status == CallStatus.OK]
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    for step, call in zip(agent_steps, sampled, strict=True):
        m = step["metrics"]
        assert m["prompt_token_ids"] == call.prompt_token_ids and m["prompt_tokens"] == len(call.prompt_token_ids)
        assert m["completion_token_ids"] == call.completion_token_ids
        assert m["logprobs"] == call.completion_logprobs
        assert step["extra"]["call_index"] == call.index
    assert len(agent_steps[-1]["metrics"]["extra"]["choices"]) == 1  # n=2: the second choice
    assert doc["extra"]["reward"] == 0.75 and doc["extra"]["harnessrl"]["calls_not_sampled"] == 1

    # into a fresh store: the trainer reads exactly the same thing
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert main(["import", str(out), "--into", fresh, "--run", "from-atif"]) == 0
    assert "imported 1 rollouts (3 calls, atif)" in (err := capsys.readouterr().err) and "trajectories.exact 1" in err
    dest = open_store(fresh)
    (imported,) = dest.list_rollouts(run_id="from-atif")
    assert imported.status == RolloutStatus.SUCCEEDED
    assert _trainer_view(dest, imported.id) == _trainer_view(store, rid)
    dest.close()


def test_an_anthropic_harness_exports_its_tool_loop_as_steps(recorded: tuple[Store, GatewayServer],
                                                             tmp_path: Path) -> None:
    """A translated API (Anthropic Messages, streamed): the same steps and the same exact tokens."""
    import anthropic

    store, server = recorded
    admin = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer admin-secret"}, timeout=30)
    d = admin.post("/admin/rollouts", json={"task_id": "t", "group_id": "g"}).json()
    c = anthropic.Anthropic(base_url=d["anthropic_base_url"], api_key=d["api_key"], max_retries=0)
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object", "properties": {}}}]
    history: list = [{"role": "user", "content": "list files"}]
    first = c.messages.create(model="claude", max_tokens=64, system="Be terse.", tools=tools, messages=history)
    use = next(b for b in first.content if b.type == "tool_use")
    history += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a.txt"}]}]
    with c.messages.stream(model="claude", max_tokens=64, system="Be terse.", tools=tools, messages=history) as s:
        final = s.get_final_message()
    admin.close()
    out = tmp_path / "atif"
    assert export_atif(store, out) == 1
    doc = orjson.loads(next(out.glob("*.json")).read_bytes())
    Trajectory.model_validate(doc)
    assert [s["source"] for s in doc["steps"]] == ["system", "user", "agent", "agent"]
    assert doc["steps"][2]["tool_calls"][0]["tool_call_id"] == use.id
    assert doc["steps"][2]["observation"]["results"] == [{"source_call_id": use.id, "content": "a.txt"}]
    assert doc["steps"][3]["message"] == final.content[0].text
    assert doc["agent"]["tool_definitions"][0]["function"]["name"] == "bash"
    dest = open_store(f"sqlite:///{tmp_path / 'fresh.db'}")
    report = import_atif(dest, out)
    (imported,) = dest.list_rollouts(run_id=report.run_id)
    assert _trainer_view(dest, imported.id)[:2] == _trainer_view(store, d["rollout_id"])[:2]
    dest.close()
