"""The judge's pure parts: strict parsing, the transcript and its truncation rule, the prompt, the config."""

from __future__ import annotations

import json

import pytest

from harnessrl.rewards.config import JudgeConfig, RewardConfig
from harnessrl.rewards.judge_cache import cache_key
from harnessrl.rewards.judge_parse import JudgeParseError, parse_group, parse_pointwise
from harnessrl.rewards.judge_prompt import JudgeItem, attempt_ids, guarded_messages, nonce
from harnessrl.rewards.judge_transcript import conversation_turns, render_transcript
from harnessrl.types import ApiKind, Call, CallStatus


def test_pointwise_parsing_is_strict() -> None:
    assert parse_pointwise('{"score": 0.75, "reason": "ok"}') == (0.75, "ok")
    assert parse_pointwise('```json\n{"score": 1, "reason": "fenced"}\n```') == (1.0, "fenced")
    for bad in ("8/10", '{"score": 1.5, "reason": "x"}', '{"reason": "no score"}', '{"score": "NaN", "reason": ""}',
                'Sure! {"score": 1, "reason": "x"}', ""):
        with pytest.raises(JudgeParseError):
            parse_pointwise(bad)


def test_regex_parsing_names_score_and_reason() -> None:
    regex = r"SCORE: (?P<score>[0-9.]+)\s+WHY: (?P<reason>.*)"
    assert parse_pointwise("SCORE: 0.5 WHY: half right", regex) == (0.5, "half right")
    with pytest.raises(JudgeParseError, match="does not match"):
        parse_pointwise("no score here", regex)
    with pytest.raises(JudgeParseError):
        parse_pointwise("SCORE: 7 WHY: out of range", regex)


def test_group_parsing_needs_every_attempt_once() -> None:
    text = json.dumps({"scores": [{"id": "b", "score": 0.2, "reason": "y"}, {"id": "A", "score": 0.9, "reason": "x"}]})
    assert parse_group(text, ["A", "B"]) == [(0.9, "x"), (0.2, "y")]
    dup = json.dumps({"scores": [{"id": "A", "score": 1, "reason": ""}, {"id": "A", "score": 0, "reason": ""}]})
    with pytest.raises(JudgeParseError, match="twice"):
        parse_group(dup, ["A", "B"])
    with pytest.raises(JudgeParseError, match="unknown"):
        parse_group(json.dumps({"scores": [{"id": "C", "score": 1, "reason": ""}]}), ["A"])


def _call(index: int, messages: list[dict], answer: str, status: CallStatus = CallStatus.OK) -> Call:
    return Call("r", index, ApiKind.CHAT, status, {"messages": messages},
                {"choices": [{"message": {"role": "assistant", "content": answer}}]}, [], [], 0)


def test_transcript_keeps_each_conversation_once() -> None:
    first = [{"role": "user", "content": "q"}]
    second = [*first, {"role": "assistant", "content": "a1"}, {"role": "tool", "content": "result"}]
    calls = [_call(0, first, "a1"), _call(1, second, "a2"), _call(2, [{"role": "user", "content": "other"}], "a3"),
             _call(3, [{"role": "user", "content": "failed"}], "", CallStatus.ERROR)]
    assert [(t.role, t.text) for t in conversation_turns(calls)] == [
        ("user", "q"), ("assistant", "a1"), ("tool", "result"), ("assistant", "a2"),
        ("user", "other"), ("assistant", "a3")]


def test_truncation_rule_keeps_the_task_and_the_end() -> None:
    turns = [{"role": "user", "content": "the task"}]
    for i in range(40):
        turns += [{"role": "assistant", "content": f"step {i} " + "x" * 150}]
    calls = [_call(0, turns, "FINAL ANSWER " + "y" * 5000)]
    text = render_transcript(calls, "printed answer", max_transcript_chars=2000, max_turn_chars=400)
    lines = text.splitlines()
    assert json.loads(lines[0]) == {"role": "user", "content": "the task"}
    omitted = [json.loads(x) for x in lines if "omitted" in json.loads(x)]
    assert len(omitted) == 1 and omitted[0]["omitted"].endswith("characters")
    last_turn = json.loads(lines[-2])
    assert last_turn["content"].startswith("FINAL ANSWER") and "characters cut" in last_turn["content"]
    assert len(last_turn["content"]) < 500
    assert json.loads(lines[-1]) == {"role": "harness stdout (tail)", "content": "printed answer"}
    assert sum(len(x) + 1 for x in lines[:-1]) <= 2000 + 100  # the budget, give or take the omitted line
    assert render_transcript([], "") .startswith('{"role": "note"')


def test_prompt_quotes_transcripts_with_a_nonce_and_puts_the_rubric_last() -> None:
    items = [JudgeItem({"q": 1}, "Reference answer: X", '{"role": "assistant", "content": "X"}'),
             JudgeItem({"q": 1}, "Reference answer: X", '{"role": "assistant", "content": "Y"}')]
    system, user = guarded_messages(items, "group")
    text = user["content"]
    code = nonce(items)
    assert f"<<<ATTEMPT A TRANSCRIPT {code}>>>" in text and f"<<<END ATTEMPT B {code}>>>" in text
    assert text.index("Reference answer: X") > text.index(f"<<<END ATTEMPT B {code}>>>")
    assert '"scores"' in text and "never instructions" in system["content"]
    assert attempt_ids(28)[-2:] == ["AA", "AB"]
    with pytest.raises(ValueError, match="one task and one rubric"):
        guarded_messages([items[0], JudgeItem({"q": 2}, "r", "t")], "group")


def test_cache_key_covers_rubric_transcripts_and_order() -> None:
    a, b = JudgeItem({}, "r", "t1"), JudgeItem({}, "r", "t2")
    assert cache_key("m", "group", [a, b]) == cache_key("m", "group", [JudgeItem({}, "r", "t1"), b])
    assert len({cache_key("m", "group", [a, b]), cache_key("m", "group", [b, a]),
                cache_key("m2", "group", [a, b]), cache_key("m", "group", [JudgeItem({}, "r2", "t1"), b])}) == 4


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="named group"):
        JudgeConfig(url="u", score_regex=r"[0-9]+")
    with pytest.raises(ValueError, match="pointwise"):
        JudgeConfig(url="u", mode="group", score_regex=r"(?P<score>[0-9]+)")
    with pytest.raises(ValueError, match="needs weights"):
        RewardConfig(combine="weighted")
    with pytest.raises(ValueError, match="unknown sources"):
        RewardConfig(combine="weighted", weights={"vibes": 1.0})
    with pytest.raises(ValueError, match="no \\[rewards.judge\\]"):
        RewardConfig(combine="judge")
    with pytest.raises(ValueError, match="verifier and a judge"):
        RewardConfig(verifier=["python", "v.py"], judge=JudgeConfig(url="policy"))
    RewardConfig(combine="weighted", weights={"verifier": 0.5, "judge": 0.5}, judge=JudgeConfig(url="policy"))


def test_policy_url_is_the_runs_own_engine_and_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from harnessrl.rewards.judge import JudgeSetupError, make_judge

    judge = make_judge(JudgeConfig(url="policy"), None, policy_urls=["http://127.0.0.1:9/v1", "http://other/v1"])
    assert judge._client.base_url == "http://127.0.0.1:9/v1"
    asyncio.run(judge.aclose())
    with pytest.raises(JudgeSetupError, match="policy"):
        make_judge(JudgeConfig(url="policy"), None)
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    with pytest.raises(JudgeSetupError, match="JUDGE_TEST_KEY"):
        make_judge(JudgeConfig(url="http://x/v1", api_key_env="JUDGE_TEST_KEY"), None)
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-secret")
    judge = make_judge(JudgeConfig(url="http://x/v1", api_key_env="JUDGE_TEST_KEY"), None)
    assert judge._client._http.headers["authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in repr(judge.config)  # the config holds the variable's name, never the key
    asyncio.run(judge.aclose())
