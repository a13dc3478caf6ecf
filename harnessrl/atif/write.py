"""``harnessrl export --format atif``: each recorded rollout as one ATIF trajectory (one JSON file each).

One file per rollout because that is what ATIF tools read: Harbor writes ``agent/trajectory.json`` per trial,
and its validator and viewer take one trajectory per file. Each sampled model call becomes one agent step
(the spec's one-LLM-call-per-step convention) with its exact tokens in the spec's own metrics fields:
``prompt_token_ids``, ``completion_token_ids`` and ``logprobs``. The conversation the harness sent is read
back as steps: system and user messages before a call become system and user steps, and the tool results
the *next* request carries become the observation of the step whose tool calls they answer.
Field by field: ``docs/trajectory-format.md`` (ATIF section).

Redacted like the other export: the configured patterns over every text, and the run's tokenizer (when it
loads here) over each call's tokens, so a store recorded with weaker patterns does not leak through a file.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from harnessrl.atif.schema import WRITTEN_VERSION
from harnessrl.conversation import request_turns, response_turns
from harnessrl.export import TokenScrubbers
from harnessrl.redaction.text import redactor_for
from harnessrl.redaction.tokens import TokenRedactor
from harnessrl.rewards.outcome import rollout_reward
from harnessrl.store import NotFound, Store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens, Reward, Rollout, RolloutStatus, Run

log = logging.getLogger(__name__)

Message = dict[str, Any]


def _harnessrl_version() -> str:
    try:
        return version("harnessrl")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "unknown"


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content list (other parts are not text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type", "text")
                       in ("text", "input_text", "output_text"))
    return json.dumps(content, ensure_ascii=False)


def _chat_view(call: Call, responses: dict[str, list[Message]]) -> tuple[list[Message], Message, Any]:
    """(messages sent, message answered, tools) of a call in OpenAI chat form, whatever API the harness used.

    Anthropic, Gemini and Responses bodies are read with the gateway's own translations (the chat request the
    policy was served); a body they cannot read falls back to its text turns, without tool structure."""
    req, resp = call.request, call.response or {}
    try:
        if call.api == ApiKind.CHAT:
            return list(req.get("messages") or []), dict(resp["choices"][0]["message"]), req.get("tools")
        if call.api == ApiKind.COMPLETIONS:
            prompt = req.get("prompt")
            return ([{"role": "user", "content": prompt if isinstance(prompt, str) else json.dumps(prompt)}],
                    {"role": "assistant", "content": str(resp["choices"][0].get("text", ""))}, None)
        from harnessrl.gateway.apis import anthropic, gemini
        from harnessrl.gateway.apis import responses as responses_api

        if call.api == ApiKind.ANTHROPIC_MESSAGES:
            chat = anthropic.to_chat(req).chat
            reply = anthropic.to_chat({"messages": [{"role": "user", "content": "-"},
                                                    {"role": "assistant", "content": resp["content"]}]})
            return chat["messages"], reply.chat["messages"][-1], chat.get("tools")
        if call.api == ApiKind.GEMINI:
            chat = gemini.to_chat(req, call.requested_model).chat
            return chat["messages"], gemini.answered_message(resp), chat.get("tools")
        prev = req.get("previous_response_id")
        t = responses_api.to_chat(req, responses.get(prev) if isinstance(prev, str) else None)
        conversation = responses_api.conversation(t.chat, t.notes.get("conversation_start", 0), resp)
        responses[str(resp.get("id"))] = conversation
        return t.chat["messages"], conversation[-1], t.chat.get("tools")
    except Exception:  # noqa: BLE001 - an unusual body: keep its text, lose its tool structure
        sent = [{"role": t.role if t.role in ("system", "user", "assistant", "tool") else "user", "content": t.text}
                for t in request_turns(req)]
        answers = response_turns(call.response)
        return sent, {"role": "assistant", "content": answers[0].text if answers else ""}, None


def _key(m: Message) -> tuple[str, str, int]:
    """What identifies a message when a later request re-sends it (ids and whitespace may be re-serialized)."""
    return str(m.get("role")), _text(m.get("content")), len(m.get("tool_calls") or ())


def _tool_calls(reply: Message, call_index: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """ATIF tool calls of a reply, and the raw argument text of those whose arguments are not a JSON object
    (ATIF wants an object; the text is kept in the step's ``extra`` so an import can restore it)."""
    out, raw = [], {}
    for j, tc in enumerate(reply.get("tool_calls") or ()):
        fn = tc.get("function") or {}
        call_id = str(tc.get("id") or f"call_{call_index}_{j}")
        text = fn.get("arguments")
        try:
            args = json.loads(text) if isinstance(text, str) else text
        except ValueError:
            args = None
        if not isinstance(args, dict):
            raw[call_id] = text if isinstance(text, str) else json.dumps(text)
            args = {}
        out.append({"tool_call_id": call_id, "function_name": str(fn.get("name", "")), "arguments": args})
    return out, raw


def _scrubbed(call: Call, scrub: TokenRedactor | None) -> tuple[list[int], list[ChoiceTokens], dict[str, Any]]:
    """(prompt, choices, sampling) of a call with any token run that still decodes to a secret replaced."""
    if scrub is None or "redacted" in call.sampling:  # the gateway scrubbed these tokens when it recorded them
        return list(call.prompt_token_ids), list(call.choices), call.sampling
    new = NewCall(call.rollout_id, call.api, call.status, call.request, call.response, list(call.prompt_token_ids),
                  list(call.choices), call.policy_version)
    marker = scrub.scrub(new)
    if marker is None:
        return list(call.prompt_token_ids), list(call.choices), call.sampling
    return list(new.prompt_token_ids), list(new.choices), {**call.sampling, "redacted": marker}


class _Steps:
    """The steps of one trajectory as they are built, and the conversation they already show."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.shown: list[tuple[str, str, int]] = []

    def _add(self, step: dict[str, Any]) -> None:
        self.steps.append({"step_id": len(self.steps) + 1, **step})

    def sent(self, messages: list[Message]) -> None:
        """Steps for what a request adds to the conversation already shown (tool results become the
        observation of the agent step that asked for them)."""
        keys = [_key(m) for m in messages]
        k = 0
        while k < min(len(keys), len(self.shown)) and keys[k] == self.shown[k]:
            k += 1
        rewritten = k < len(self.shown)  # the harness edited its history (compaction, a new sub-conversation)
        for m in messages[k:]:
            role, text = str(m.get("role")), _text(m.get("content"))
            if role == "tool":
                agent = next((s for s in reversed(self.steps) if s["source"] == "agent"), None)
                if agent is not None:
                    ids = {c["tool_call_id"] for c in agent.get("tool_calls") or ()}
                    call_id = m.get("tool_call_id")
                    agent.setdefault("observation", {"results": []})["results"].append(
                        {"source_call_id": call_id if call_id in ids else None, "content": text})
                    continue
                role = "user"
            step: dict[str, Any] = {"source": {"system": "system", "developer": "system",
                                               "assistant": "agent"}.get(role, "user"), "message": text}
            if role == "assistant":  # context the harness wrote itself: no tokens were sampled for it
                calls, raw = _tool_calls(m, -1)
                step.update({"tool_calls": calls} if calls else {})
                step["extra"] = {"sampled": False, **({"raw_arguments": raw} if raw else {})}
            if rewritten:
                step.setdefault("extra", {})["history_rewritten"] = True
            self._add(step)
        self.shown = keys

    def answered(self, call: Call, reply: Message, prompt: list[int], choices: list[ChoiceTokens],
                 sampling: dict[str, Any]) -> None:
        """The agent step of one sampled call: its reply, and its tokens and logprobs in ``metrics``."""
        c0 = choices[0]
        metrics: dict[str, Any] = {"prompt_tokens": len(prompt), "completion_tokens": len(c0.token_ids),
                                   "prompt_token_ids": prompt, "completion_token_ids": list(c0.token_ids),
                                   "logprobs": list(c0.logprobs)}
        if len(choices) > 1:  # n > 1: the other choices, same prompt
            metrics["extra"] = {"choices": [{"completion_token_ids": list(c.token_ids), "logprobs": list(c.logprobs),
                                             "finish_reason": c.finish_reason} for c in choices[1:]]}
        calls, raw = _tool_calls(reply, call.index)
        extra: dict[str, Any] = {
            "call_index": call.index, "policy_version": call.policy_version, "finish_reason": c0.finish_reason,
            "api": call.api.value, "requested_model": call.requested_model,
            "sampling": {k: sampling[k] for k in ("temperature", "redacted") if k in sampling},
            "fidelity": call.fidelity.value if call.fidelity else None, "fidelity_reason": call.fidelity_reason}
        if raw:
            extra["raw_arguments"] = raw
        step: dict[str, Any] = {"source": "agent", "message": _text(reply.get("content"))}
        if call.created_at:
            step["timestamp"] = datetime.fromtimestamp(call.created_at, UTC).isoformat()
        reasoning = reply.get("reasoning_content") or reply.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            step["reasoning_content"] = reasoning
        if calls:
            step["tool_calls"] = calls
        step.update(metrics=metrics, extra=extra)
        self._add(step)
        self.shown.append(_key(reply))


def _policy_model(run: Run | None) -> str | None:
    engine = run.config.get("engine") if run is not None and isinstance(run.config, dict) else None
    model = engine.get("model") if isinstance(engine, dict) else None
    return model if isinstance(model, str) and model else None


def trajectory(rollout: Rollout, calls: Sequence[Call], rewards: Sequence[Reward], run: Run | None = None,
               scrub: TokenRedactor | None = None) -> dict[str, Any]:
    """One rollout as an ATIF document (a plain dict, JSON-ready): its sampled calls as agent steps."""
    steps, responses = _Steps(), dict[str, list[Message]]()
    tools: Any = None
    sampled = [c for c in sorted(calls, key=lambda c: c.index) if c.status == CallStatus.OK and c.choices]
    for call in sampled:
        sent, reply, call_tools = _chat_view(call, responses)
        tools = tools or call_tools
        steps.sent(sent)
        prompt, choices, sampling = _scrubbed(call, scrub)
        steps.answered(call, reply, prompt, choices, sampling)
    runner = run.config.get("runner") if run is not None and isinstance(run.config, dict) else None
    agent: dict[str, Any] = {"name": "harnessrl", "version": _harnessrl_version(), "extra": {
        "recorded_by": "harnessrl gateway: the harness's model calls, whatever agent made them"}}
    if isinstance(runner, dict) and runner.get("command"):
        agent["extra"]["runner_command"] = runner["command"]
    if (model := _policy_model(run) or next((c.requested_model for c in sampled if c.requested_model), None)):
        agent["model_name"] = model
    if isinstance(tools, list) and tools:
        agent["tool_definitions"] = tools
    return {
        "schema_version": WRITTEN_VERSION, "session_id": rollout.id, "agent": agent, "steps": steps.steps,
        "notes": "Exported by harnessrl: one agent step per sampled model call, its exact prompt and completion "
                 "token IDs and logprobs in metrics; the rollout and its rewards in extra.",
        "final_metrics": {"total_prompt_tokens": sum(len(c.prompt_token_ids) for c in sampled),
                          "total_completion_tokens": sum(len(c.completion_token_ids) for c in sampled),
                          "total_steps": len(steps.steps)},
        "extra": {
            "reward": rollout_reward(list(rewards)),
            "rewards": [{"name": w.name, "value": w.value, "call_index": w.call_index} for w in rewards],
            "harnessrl": {"rollout_id": rollout.id, "run_id": rollout.run_id, "task_id": rollout.task_id,
                          "group_id": rollout.group_id, "step": rollout.step, "split": rollout.metadata.get("split"),
                          "status": rollout.status.value,
                          "failure_kind": rollout.failure_kind.value if rollout.failure_kind else None,
                          "policy_version": rollout.policy_version, "calls": len(calls),
                          "calls_not_sampled": len(calls) - len(sampled)}},
    }


def trajectories(store: Store, *, run_id: str | None = None, status: RolloutStatus | None = None,
                 redact: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """The ATIF document of every selected rollout with at least one sampled call, redacted."""
    runs = {r.id: r for r in store.list_runs()}
    if run_id is not None and run_id not in runs:
        raise NotFound(f"run {run_id!r} does not exist")
    redactor = redactor_for(list(runs.values()) if run_id is None else [runs[run_id]], redact)
    scrubbers = TokenScrubbers(redactor.patterns)
    purged = 0
    for r in store.iter_rollouts(run_id=run_id, status=status):
        if r.purged_at is not None:
            purged += 1
            continue
        calls = store.get_calls(r.id)
        if not any(c.status == CallStatus.OK and c.choices for c in calls):
            continue
        run = runs.get(r.run_id) if r.run_id else None
        yield redactor(trajectory(r, calls, store.get_rewards(r.id), run, scrubbers.get(run)))
    if purged:
        log.warning("%d selected rollouts were purged by retention (docs/retention.md) and are not exported", purged)


def export_atif(store: Store, out: str | Path, *, run_id: str | None = None, status: RolloutStatus | None = None,
                redact: Sequence[str] = ()) -> int:
    """Write ``out/<rollout id>.json`` per rollout (each written to a temporary name, then renamed)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out}: ATIF is one JSON file per trajectory; give a folder")
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for doc in trajectories(store, run_id=run_id, status=status, redact=redact):
        path = out / (re.sub(r"[^A-Za-z0-9._-]", "_", doc["session_id"]) + ".json")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        tmp.replace(path)
        n += 1
    log.info("exported %d ATIF trajectories to %s", n, out)
    return n
