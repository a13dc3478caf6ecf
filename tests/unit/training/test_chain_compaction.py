"""Compaction and sub-agents, trained: no chain of a rollout is dropped, each gets the rollout's advantage.

Calls are shaped as a harness sends them (rendered by the gateway's token-exact renderer with the tiny model's
tokenizer) and recorded in the real store: a main conversation that runs a sub-agent beside it, then a
compaction (a summary request, then a fresh prompt carrying the summary, then more calls).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from harnessrl.gateway.render import TemplateRenderer
from harnessrl.models import tiny_tokenizer
from harnessrl.store import NewCall, open_store
from harnessrl.store.base import Store
from harnessrl.training.config import TrainingConfig
from harnessrl.training.losses import token_weights
from harnessrl.training.samples import build_samples
from harnessrl.training.train_batch import batch_from_store
from harnessrl.types import ApiKind, CallStatus, ChainStart, ChoiceTokens, RolloutStatus, Sample

pytest.importorskip("harnessrl.store.sqlite")

TOK = tiny_tokenizer()
END = TOK.convert_tokens_to_ids("<|im_end|>")
TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "run a command",
                                      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "task", "description": "run a sub-agent",
                                      "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}}}},
]
AGENT = "You are a coding agent. Edit the repository until the tests pass."
SUMMARY = ("the user asked to fix the failing test in fox.py; we listed the files, a sub-agent found that "
           "fox.py and dog.py both import the lazy helper, and we changed the return value in fox.py")


class Conversation:
    """One conversation of a harness (the main agent, a sub-agent, a summary request) on the gateway's renderer:
    each call is rendered, 'sampled' (the given text), recorded in the store, and its answer kept."""

    def __init__(self, store: Store, renderer: TemplateRenderer, rollout_id: str, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None = None) -> None:
        self.store, self.renderer, self.rollout_id = store, renderer, rollout_id
        self.messages, self.tools = messages, tools

    def call(self, text: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": "policy", "messages": [dict(m) for m in self.messages]}
        if self.tools:
            body["tools"] = self.tools
        rendered = self.renderer.render(self.rollout_id, body)
        completion = TOK.encode(text, add_special_tokens=False) + [END]
        message, _ = self.renderer.parse(self.rollout_id, completion, "stop")
        (index,) = self.store.record_calls([NewCall(
            rollout_id=self.rollout_id, api=ApiKind.CHAT, status=CallStatus.OK, request=body, response=None,
            prompt_token_ids=rendered.prompt_token_ids,
            choices=[ChoiceTokens(completion, [-0.1 - 0.001 * i for i in range(len(completion))])],
            policy_version=0, fidelity=rendered.fidelity, fidelity_reason=rendered.fidelity_reason)])
        self.renderer.remember(self.rollout_id, body, rendered, completion, message, call_index=index)
        self.messages.append(message)
        return message

    def tool_result(self, message: dict[str, Any], content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": content})


def tool_call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def compacting_rollout(store: Store, renderer: TemplateRenderer, rollout_id: str) -> int:
    """Main agent (with a sub-agent run beside it) -> summary request -> fresh prompt with the summary -> more.
    Returns the index of the summary call."""
    main = Conversation(store, renderer, rollout_id, [
        {"role": "system", "content": AGENT}, {"role": "user", "content": "fix the failing test in fox.py"}],
        TOOLS)
    ls = main.call(tool_call("bash", cmd="ls"))
    main.tool_result(ls, "fox.py dog.py " + "readme.md " * 40)
    task = main.call(tool_call("task", prompt="find every file that imports the lazy helper and say which"))
    sub = Conversation(store, renderer, rollout_id, [
        {"role": "system", "content": "You are a search sub-agent. Answer briefly."},
        {"role": "user", "content": "find every file that imports the lazy helper and say which"}], TOOLS)
    grep = sub.call(tool_call("bash", cmd="grep -l lazy *.py"))
    sub.tool_result(grep, "fox.py\ndog.py")
    found = sub.call("fox.py and dog.py import the lazy helper")
    main.tool_result(task, found["content"])
    edit = main.call(tool_call("bash", cmd="echo return true > fox.py"))
    main.tool_result(edit, "ok")
    # Auto-compact: the same history under a summarizer's system prompt, plus the summary instruction.
    summarize = Conversation(store, renderer, rollout_id, [
        {"role": "system", "content": "You are a helpful assistant tasked with summarizing conversations."},
        *main.messages[1:], {"role": "user", "content": "Write a detailed summary of the conversation so far."}])
    summarize.call(f"<analysis>the test imports fox</analysis>\n<summary>{SUMMARY}</summary>")
    summary_call = len(store.get_calls(rollout_id)) - 1
    after = Conversation(store, renderer, rollout_id, [
        {"role": "system", "content": AGENT},
        {"role": "user", "content": "This session is being continued from a previous conversation. "
                                    f"Summary:\n{SUMMARY}\nContinue with the last task."}], TOOLS)
    test = after.call(tool_call("bash", cmd="python -m pytest"))
    after.tool_result(test, "1 passed")
    after.call("the test passes now")
    return summary_call


@pytest.fixture
def store():
    s = open_store("sqlite:///:memory:")
    yield s
    s.close()


def started(store: Store) -> str:
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash=uuid.uuid4().hex).id
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    return rid


def close(store: Store, rid: str, reward: float) -> None:
    store.add_reward(rid, reward)
    store.transition_rollout(rid, RolloutStatus.SUCCEEDED)


def assert_every_completion_trained_once(store: Store, rid: str, samples: list[Sample]) -> None:
    """Each recorded call's sampled tokens sit in exactly one sample, under loss mask 1 with their logprobs."""
    calls = store.get_calls(rid)
    seen: dict[int, int] = {}
    for s in samples:
        for index, (start, end) in zip(s.call_indices, s.call_spans, strict=True):
            seen[index] = seen.get(index, 0) + 1
            call = calls[index]
            assert s.token_ids[start:end] == call.completion_token_ids
            assert s.loss_mask[start:end] == [1] * (end - start)
            assert s.behaviour_logprobs[start:end] == pytest.approx(call.completion_logprobs)
    assert seen == {c.index: 1 for c in calls}, "a call's completion was dropped or trained twice"
    trained = sum(sum(s.loss_mask) for s in samples)
    assert trained == sum(len(c.completion_token_ids) for c in calls)


def test_compaction_and_sub_agent_chains_are_all_trained_with_the_rollouts_advantage(store):
    renderer = TemplateRenderer(TOK)
    rid = started(store)
    summary_call = compacting_rollout(store, renderer, rid)
    other = started(store)
    plain = Conversation(store, renderer, other, [{"role": "user", "content": "fix the failing test"}], TOOLS)
    plain.call("I cannot")
    close(store, rid, 1.0)
    close(store, other, 0.0)

    batch = batch_from_store(store, [rid, other], TrainingConfig(estimator="dr_grpo"))

    mine = [s for s in batch.samples if s.rollout_id == rid]
    assert_every_completion_trained_once(store, rid, mine)
    labels = [(s.chain, s.chain_start, s.parent_chain, s.summary_call) for s in mine]
    assert labels == [
        (0, ChainStart.FIRST, None, None),  # main agent: calls 0, 1, 4 (its prompt goes on after the sub-agent)
        (1, ChainStart.SUB_AGENT, 0, None),  # sub-agent: calls 2, 3, linked to the chain that ran it
        (2, ChainStart.SUMMARY, 0, None),  # the summary request (its own system prompt)
        (3, ChainStart.COMPACTION, 2, summary_call),  # the fresh prompt carrying the summary
    ]
    assert [s.call_indices for s in mine] == [[0, 1, 4], [2, 3], [5], [6, 7]] and summary_call == 5
    assert batch.counts["chains.compaction"] == batch.counts["chains.summary"] == 1
    assert batch.counts["chains.sub_agent"] == 1 and batch.counts["chains.first"] == 2
    # Every chain, the summary request included, is trained with the rollout's one advantage.
    assert batch.advantages[rid] == pytest.approx(0.5)
    assert all(s.advantage == pytest.approx(0.5) for s in mine)

    # rollout normalization: the four chains together weigh what the other rollout's one sample weighs,
    # shared among them by trained tokens (a rollout that compacts does not count twice).
    weights = token_weights(batch.samples, "rollout")
    per_sample = [sum(w) for w in weights]
    mine_w = [w for s, w in zip(batch.samples, per_sample, strict=True) if s.rollout_id == rid]
    assert sum(mine_w) == pytest.approx(0.5) and sum(per_sample) == pytest.approx(1.0)
    trained = sum(sum(s.loss_mask) for s in mine)
    assert mine_w == pytest.approx([0.5 * sum(s.loss_mask) / trained for s in mine])
    # sequence normalization is the one that counts chains: each sample weighs the same.
    assert [sum(w) for w in token_weights(batch.samples, "sequence")] == pytest.approx([0.2] * 5)


def test_compaction_inside_the_chain_names_its_summary_call(store):
    """Codex-style: the summary request extends the conversation (merged into the main chain), then the
    history is replaced by the summary; the new chain names the call whose completion it carries."""
    renderer = TemplateRenderer(TOK)
    rid = started(store)
    main = Conversation(store, renderer, rid, [
        {"role": "system", "content": AGENT}, {"role": "user", "content": "fix the failing test in fox.py"}], TOOLS)
    cat = main.call(tool_call("bash", cmd="cat fox.py"))
    main.tool_result(cat, "def fox():\n    return false\n" * 30)
    main.messages.append({"role": "user", "content": "Summarize the conversation for a handoff."})
    main.call(SUMMARY)
    after = Conversation(store, renderer, rid, [
        {"role": "system", "content": AGENT},
        {"role": "user", "content": f"fix the failing test in fox.py\nSummary of earlier work: {SUMMARY}"}], TOOLS)
    after.call("done")
    samples = build_samples(store.get_calls(rid), "g").samples

    assert_every_completion_trained_once(store, rid, samples)
    first, compacted = samples
    assert first.call_indices == [0, 1] and compacted.call_indices == [2]
    assert (compacted.chain_start, compacted.parent_chain, compacted.summary_call) == (ChainStart.COMPACTION, 0, 1)


def test_an_edited_history_is_a_prefix_break_and_still_trained(store):
    """A prompt that rewrites earlier turns without a summary (no earlier completion carried into a shorter
    prompt, no chain going on beside it) is labelled a plain prefix break, trained all the same."""
    renderer = TemplateRenderer(TOK)
    rid = started(store)
    main = Conversation(store, renderer, rid, [
        {"role": "system", "content": AGENT}, {"role": "user", "content": "list the files"}], TOOLS)
    ls = main.call(tool_call("bash", cmd="ls"))
    main.tool_result(ls, "fox.py")
    main.messages[1] = {"role": "user", "content": "list every file"}  # the harness edits an earlier turn
    main.call("fox.py")
    samples = build_samples(store.get_calls(rid), "g").samples

    assert_every_completion_trained_once(store, rid, samples)
    assert [(s.chain, s.chain_start, s.parent_chain) for s in samples] == [
        (0, ChainStart.FIRST, None), (1, ChainStart.PREFIX_BREAK, 0)]
