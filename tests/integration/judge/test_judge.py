"""The judge over real HTTP (a scripted judge model on loopback) scoring rollouts recorded in a real store:
pointwise and group modes, strict parsing with retries, judge failures as infra, the cache, the
concurrency limit, and the combination with a verifier."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes.fake_engine import EngineServer
from fakes.scripted_judge import ScriptedJudge
from run_config import write_run_config

from harnessrl.rewards import RewardConfig, score_attempt
from harnessrl.rewards.config import JudgeConfig
from harnessrl.rewards.judge import Judge, JudgeItem, Verdict
from harnessrl.rewards.score import finish_judged
from harnessrl.runners import AttemptResult, AttemptSpec, TaskAssets
from harnessrl.store import NewCall, Store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, RolloutStatus

RUBRIC = "Reference answer: Shalo\nThe answer must be the capital's name."
TASK = {"question": "What is the capital of Quivenzan?"}


def record_attempt(store: Store, tmp_path: Path, answer: str, group: str = "g1",
                   rubric: str | None = RUBRIC) -> tuple[AttemptSpec, AttemptResult]:
    """A rollout whose harness asked the question and got ``answer`` (one recorded chat call)."""
    r = store.create_rollout(task_id="t1", input=TASK, group_id=group, api_key_hash="h")
    messages = [{"role": "user", "content": TASK["question"]}]
    store.record_calls([NewCall(
        rollout_id=r.id, api=ApiKind.CHAT, status=CallStatus.OK, request={"messages": messages},
        response={"choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                               "finish_reason": "stop"}]},
        prompt_token_ids=[1, 2, 3], choices=[ChoiceTokens([4, 5], [-0.1, -0.2], "stop")], policy_version=0)])
    store.transition_rollout(r.id, RolloutStatus.RUNNING)
    workdir = tmp_path / r.id
    workdir.mkdir()
    spec = AttemptSpec(rollout_id=r.id, task_id="t1", task_input=TASK, command=("true",), timeout_s=10,
                       assets=TaskAssets(rubric=rubric))
    result = AttemptResult(r.id, RolloutStatus.SUCCEEDED, None, None, 0, False, "", "", 0, 0, 0.1, workdir,
                           workdir)
    return spec, result


def judge_config(url: str, **kw: object) -> JudgeConfig:
    return JudgeConfig.model_validate({"url": url, **kw})


async def _score(spec: AttemptSpec, result: AttemptResult, store: Store, config: RewardConfig,
                 judge: Judge) -> object:
    try:
        return await score_attempt(spec, result, store, config, judge=judge)
    finally:
        await judge.aclose()


def test_pointwise_scores_are_recorded_as_judge_calls_and_rewards(judge_server: EngineServer, store: Store,
                                                                  tmp_path: Path) -> None:
    config = RewardConfig(judge=judge_config(judge_server.url))
    spec, result = record_attempt(store, tmp_path, "Shalo")
    outcome = asyncio.run(_score(spec, result, store, config, Judge(config.judge, url=judge_server.url,
                                                                                  store=store)))
    assert outcome.value == 1.0 and outcome.components["judge"] == 1.0  # type: ignore[attr-defined]
    rewards = {w.name: w.value for w in store.get_rewards(spec.rollout_id)}
    assert rewards == {"judge": 1.0, "final": 1.0}
    (call,) = store.get_judge_calls(spec.rollout_id)
    assert (call.status, call.model, call.mode, call.score, call.attempts) == ("ok", "scripted-judge", "pointwise",
                                                                               1.0, 1)
    assert call.reason == "gives exactly the reference answer 'Shalo'"
    assert call.latency_s is not None and call.latency_s > 0
    assert "<<<ATTEMPT A TRANSCRIPT" in (call.request or "") and "Shalo" in (call.response or "")
    assert store.get_calls(spec.rollout_id)[0].index == 0 and len(store.get_calls(spec.rollout_id)) == 1  # not a call


def test_group_mode_scores_a_whole_group_in_one_call(judge_server: EngineServer, scripted: ScriptedJudge,
                                                     store: Store, tmp_path: Path) -> None:
    config = RewardConfig(judge=judge_config(judge_server.url, mode="group"))
    attempts = [record_attempt(store, tmp_path, a) for a in ("Shalo", "It is Shalo.", "Felo", "Shalo")]
    judge = Judge(config.judge, url=judge_server.url, store=store)

    async def run() -> list[float | None]:
        try:
            pending = [await score_attempt(s, r, store, config, judge=judge, defer_judge=True) for s, r in attempts]
            assert all(p.pending == ("judge",) and p.value is None for p in pending)
            assert all(store.get_rewards(s.rollout_id) == [] for s, _ in attempts)  # nothing final yet
            verdicts = await judge.judge([judge.item(s, r, store) for s, r in attempts])
            return [finish_judged(p, v, store, config).value for p, v in zip(pending, verdicts, strict=True)]
        finally:
            await judge.aclose()

    assert asyncio.run(run()) == [1.0, 0.5, 0.0, 1.0]
    assert len(scripted.requests) == 1  # one call for the group
    rows = [store.get_judge_calls(s.rollout_id)[0] for s, _ in attempts]
    assert len({r.call_id for r in rows}) == 1 and [r.position for r in rows] == [0, 1, 2, 3]
    assert rows[0].request is not None and all(r.request is None for r in rows[1:])  # the prompt once
    assert all(r.mode == "group" and r.status == "ok" for r in rows)


def test_unparseable_answers_are_retried_then_an_infra_failure(judge_server: EngineServer,
                                                               scripted: ScriptedJudge, store: Store,
                                                               tmp_path: Path) -> None:
    config = RewardConfig(judge=judge_config(judge_server.url, retries=2, cache=False))
    scripted.garbage_next = 2  # two bad answers, then a good one: retried to success
    spec, result = record_attempt(store, tmp_path, "Shalo")
    ok = asyncio.run(_score(spec, result, store, config, Judge(config.judge, url=judge_server.url, store=store)))
    assert ok.value == 1.0 and store.get_judge_calls(spec.rollout_id)[0].attempts == 3  # type: ignore[attr-defined]

    scripted.garbage_next, scripted.fail_next = 2, [503]  # three failures: retries used up
    spec, result = record_attempt(store, tmp_path, "Shalo")
    bad = asyncio.run(_score(spec, result, store, config, Judge(config.judge, url=judge_server.url, store=store)))
    assert bad.value is None and bad.failure_kind == FailureKind.INFRA  # type: ignore[attr-defined]
    assert bad.status == RolloutStatus.FAILED and "judge failed" in (bad.reason or "")  # type: ignore[attr-defined]
    assert store.get_rewards(spec.rollout_id) == []  # never a silent 0
    (call,) = store.get_judge_calls(spec.rollout_id)
    assert call.status == "error" and call.score is None and call.attempts == 3
    assert "not JSON" in (call.error or "") and "pretty good" in (call.response or "")


def test_group_answer_missing_an_attempt_is_not_accepted(judge_server: EngineServer, store: Store,
                                                         tmp_path: Path) -> None:
    """A judge model that scores 2 of 3 attempts is asked again, and then the group is infra, not 0."""
    from harnessrl.rewards.judge_parse import JudgeParseError, parse_group

    with pytest.raises(JudgeParseError, match="missing"):
        parse_group('{"scores": [{"id": "A", "score": 1, "reason": "x"}, {"id": "B", "score": 0, "reason": "y"}]}',
                    ["A", "B", "C"])


def test_cache_reuses_a_score_across_judges_through_the_store(judge_server: EngineServer,
                                                              scripted: ScriptedJudge, store: Store,
                                                              tmp_path: Path) -> None:
    config = judge_config(judge_server.url)
    spec1, res1 = record_attempt(store, tmp_path, "Shalo")
    spec2, res2 = record_attempt(store, tmp_path, "Shalo")  # same transcript, another rollout

    async def judge_once(spec: AttemptSpec, result: AttemptResult) -> float | None:
        judge = Judge(config, url=judge_server.url, store=store)  # a new judge: a re-run of the process
        try:
            (v,) = await judge.judge([judge.item(spec, result, store)])
            return v.score
        finally:
            await judge.aclose()

    assert asyncio.run(judge_once(spec1, res1)) == 1.0
    assert asyncio.run(judge_once(spec2, res2)) == 1.0
    assert len(scripted.requests) == 1  # the second was not paid for
    (cached,) = store.get_judge_calls(spec2.rollout_id)
    assert (cached.status, cached.score, cached.attempts) == ("cached", 1.0, 0)
    # another rubric is another key
    item = JudgeItem(TASK, "Reference answer: Felo", store.get_judge_calls(spec1.rollout_id)[0].request or "")

    async def other_rubric() -> None:
        judge = Judge(config, url=judge_server.url, store=None)
        try:
            await judge.judge([item])
        finally:
            await judge.aclose()

    asyncio.run(other_rubric())
    assert len(scripted.requests) == 2


def test_concurrency_limit_holds_for_the_whole_run(judge_server: EngineServer, scripted: ScriptedJudge,
                                                   store: Store, tmp_path: Path) -> None:
    scripted.delay_s = 0.2
    config = judge_config(judge_server.url, concurrency=2, cache=False)
    attempts = [record_attempt(store, tmp_path, f"answer {i}") for i in range(6)]

    async def run() -> None:
        judge = Judge(config, url=judge_server.url, store=store)
        try:
            await asyncio.gather(*(judge.judge([judge.item(s, r, store)]) for s, r in attempts))
        finally:
            await judge.aclose()

    asyncio.run(run())
    assert len(scripted.requests) == 6 and scripted.max_in_flight == 2


def test_weighted_combination_with_a_verifier_records_every_component(judge_server: EngineServer, store: Store,
                                                                      tmp_path: Path) -> None:
    import sys

    verifier = tmp_path / "verify.py"
    verifier.write_text("print(0.2)\n")
    config = RewardConfig(verifier=[sys.executable, str(verifier)], combine="weighted",
                          weights={"verifier": 0.5, "judge": 0.5}, judge=judge_config(judge_server.url))
    spec, result = record_attempt(store, tmp_path, "It is Shalo.")
    res = AttemptResult(**{**{f: getattr(result, f) for f in result.__slots__}})  # type: ignore[arg-type]
    outcome = asyncio.run(_score(spec, res, store, config, Judge(config.judge, url=judge_server.url,
                                                                            store=store)))
    assert outcome.components == {"verifier": 0.2, "judge": 0.5}  # type: ignore[attr-defined]
    assert outcome.value == pytest.approx(0.35)  # type: ignore[attr-defined]
    names = [(w.name, w.value) for w in store.get_rewards(spec.rollout_id)]
    assert names == [("verifier", 0.2), ("judge", 0.5), ("final", pytest.approx(0.35))]


def test_a_task_without_rubric_is_a_judge_failure_with_the_fix(judge_server: EngineServer, store: Store,
                                                               tmp_path: Path) -> None:
    config = RewardConfig(judge=judge_config(judge_server.url))
    spec, result = record_attempt(store, tmp_path, "Shalo", rubric=None)
    outcome = asyncio.run(_score(spec, result, store, config, Judge(config.judge, url=judge_server.url,
                                                                                  store=store)))
    assert outcome.failure_kind == FailureKind.INFRA  # type: ignore[attr-defined]
    assert "rubric" in (outcome.reason or "")  # type: ignore[attr-defined]


def test_preflight_names_an_unreachable_judge(judge_server: EngineServer, store: Store) -> None:
    import socket

    from harnessrl.rewards.judge import JudgeSetupError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"

    async def preflight(url: str, model: str | None) -> None:
        judge = Judge(judge_config(url, model=model), url=url, store=store)
        try:
            await judge.preflight()
        finally:
            await judge.aclose()

    asyncio.run(preflight(judge_server.url, None))
    asyncio.run(preflight(judge_server.url, "named"))
    for model in (None, "named"):
        with pytest.raises(JudgeSetupError, match="url|model"):
            asyncio.run(preflight(dead, model))


def test_a_slow_judge_is_a_timeout_with_the_setting_to_change(judge_server: EngineServer, scripted: ScriptedJudge,
                                                              store: Store, tmp_path: Path) -> None:
    scripted.delay_s = 1.0
    config = judge_config(judge_server.url, timeout_s=0.3, retries=0, cache=False)
    spec, result = record_attempt(store, tmp_path, "Shalo")

    async def run() -> str | None:
        judge = Judge(config, url=judge_server.url, store=store)
        try:
            (v,) = await judge.judge([judge.item(spec, result, store)])
            return v.error
        finally:
            await judge.aclose()

    assert "did not answer within 0.3s ([rewards.judge] timeout_s)" in (asyncio.run(run()) or "")


def test_request_shape_and_regex_parsing(judge_server: EngineServer, scripted: ScriptedJudge, store: Store,
                                         tmp_path: Path) -> None:
    """JSON mode asks for the answer's schema; score_regex reads a free-form answer (and sends no schema)."""
    spec, result = record_attempt(store, tmp_path, "Shalo")

    async def run(config: JudgeConfig) -> Verdict:
        judge = Judge(config, url=judge_server.url, store=store)
        try:
            (v,) = await judge.judge([judge.item(spec, result, store)])
            return v
        finally:
            await judge.aclose()

    v = asyncio.run(run(judge_config(judge_server.url, cache=False, temperature=0.0, max_tokens=256)))
    body = scripted.requests[-1]
    assert body["response_format"]["type"] == "json_schema" and body["model"] == "scripted-judge"
    assert (body["max_tokens"], body["temperature"]) == (256, 0.0) and v.score == 1.0
    v = asyncio.run(run(judge_config(judge_server.url, cache=False,
                                     score_regex=r'"score": (?P<score>[0-9.]+), "reason": "(?P<reason>[^"]*)"')))
    assert "response_format" not in scripted.requests[-1]
    assert (v.score, v.reason) == (1.0, "gives exactly the reference answer 'Shalo'")


def test_a_run_with_an_unreachable_judge_stops_before_loading_the_model(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    config = {"run": {"dir": f"{tmp_path}/run"}, "tasks": {"train": f"{tmp_path}/t.jsonl"}, "engine": {"model": "tiny"},
              "runner": {"command": [sys.executable, "-c", "pass"]}, "rewards": {"judge": {"url": dead, "rubric": "r"}}}
    cfg = write_run_config(tmp_path, config)
    (tmp_path / "t.jsonl").write_text('{"id": "t", "input": {}}\n')
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "train", str(cfg)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and time.monotonic() - started < 30
    assert f"[rewards.judge] endpoint {dead} unreachable" in out.stderr and "Traceback" not in out.stderr
    write_run_config(cfg, config, {"rewards": {"judge": {"api_key_env": "HARNESSRL_TEST_NO_SUCH_KEY"}}})
    monkeypatch.delenv("HARNESSRL_TEST_NO_SUCH_KEY", raising=False)
    out = subprocess.run([sys.executable, "-m", "harnessrl.cli", "train", str(cfg)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "HARNESSRL_TEST_NO_SUCH_KEY" in out.stderr and "Traceback" not in out.stderr


def test_secrets_in_stdout_and_input_never_reach_the_judge(judge_server: EngineServer, scripted: ScriptedJudge,
                                                           store: Store, tmp_path: Path) -> None:
    import dataclasses

    key = "sk-" + "A1b2C3d4" * 4
    spec, result = record_attempt(store, tmp_path, "Shalo")
    spec = dataclasses.replace(spec, task_input={**TASK, "token": key})
    result = dataclasses.replace(result, stdout=f"using key {key}\nShalo")

    async def run() -> None:
        judge = Judge(judge_config(judge_server.url), url=judge_server.url, store=store)
        try:
            await judge.judge([judge.item(spec, result, store)])
        finally:
            await judge.aclose()

    asyncio.run(run())
    sent = str(scripted.requests[-1])
    assert key not in sent and "[REDACTED]" in sent
    assert key not in (store.get_judge_calls(spec.rollout_id)[0].request or "x")


def test_a_remote_attempt_is_judged_from_its_recorded_transcript(judge_server: EngineServer, store: Store,
                                                                 tmp_path: Path) -> None:
    """An attempt that ran in a Kubernetes pod has no local workspace; the judge needs none."""
    import dataclasses

    config = RewardConfig(judge=judge_config(judge_server.url))
    spec, result = record_attempt(store, tmp_path, "Shalo")
    result = dataclasses.replace(result, workdir=None, attempt_dir=None)
    outcome = asyncio.run(_score(spec, result, store, config, Judge(config.judge, url=judge_server.url,
                                                                                  store=store)))
    assert outcome.value == 1.0 and outcome.components == {"judge": 1.0}  # type: ignore[attr-defined]
