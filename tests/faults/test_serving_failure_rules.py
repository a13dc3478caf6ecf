"""The rules that make an attempt ``infra`` from what the gateway recorded (fast; no processes).

The slow fault tests drive them end to end; these pin each rule on a real SQLite store.
"""

from __future__ import annotations

import pytest

from harnessrl.rewards import serving
from harnessrl.runners.spec import AttemptResult
from harnessrl.store import NewCall, open_store
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, RolloutStatus


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 's.db'}")
    yield s
    s.close()


def rollout_with(store, *calls: tuple[CallStatus, str | None]) -> str:  # noqa: ANN001
    r = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h")
    store.record_calls([NewCall(rollout_id=r.id, api=ApiKind.CHAT, status=status, request={"messages": []},
                                response=None, prompt_token_ids=[1, 2, 3], choices=[ChoiceTokens([4], [-0.1], "stop")],
                                policy_version=0, latency_s=2.5, error=error) for status, error in calls])
    return r.id


def result(rid: str, exit_code: int | None = 0, timed_out: bool = False) -> AttemptResult:
    return AttemptResult(rollout_id=rid, status=RolloutStatus.TIMED_OUT if timed_out else RolloutStatus.SUCCEEDED,
                         failure_kind=None, reason=None, exit_code=exit_code, timed_out=timed_out, stdout="",
                         stderr="", stdout_bytes=0, stderr_bytes=0, duration_s=3.0, attempt_dir=None, workdir=None)


MID_STREAM = "502 None: engine engine-0 failed mid-stream: ClientPayloadError"
OK, ERR, CUT = CallStatus.OK, CallStatus.ERROR, CallStatus.CANCELLED


def test_a_harness_that_stopped_at_an_engine_failure_is_infra(store):
    rid = rollout_with(store, (OK, None), (ERR, MID_STREAM))
    assert "failed on the serving side" in serving.serving_failure(store, result(rid, exit_code=1))
    assert serving.serving_failure(store, result(rid, exit_code=0)) is not None  # nothing answered after it


def test_a_harness_that_got_past_it_and_finished_is_scored(store):
    rid = rollout_with(store, (ERR, "503 no_engine_available: no engine"), (OK, None))
    assert serving.serving_failure(store, result(rid, exit_code=0)) is None
    assert serving.serving_failure(store, result(rid, exit_code=1)) is not None


def test_its_own_4xx_is_not_infra(store):
    rid = rollout_with(store, (OK, None), (ERR, "400 rollout_call_budget: the rollout's call budget is used up"))
    assert serving.serving_failure(store, result(rid, exit_code=1)) is None


def test_a_timeout_with_a_call_cut_off_is_infra_one_without_is_agent(store, monkeypatch):
    monkeypatch.setattr(serving, "CUT_OFF_WAIT_S", 0.2)
    waiting = rollout_with(store, (OK, None), (CUT, "client went away while the call was served"))
    assert "timed out waiting for the engine" in serving.serving_failure(store, result(waiting, None, True))
    working = rollout_with(store, (OK, None), (OK, None))
    assert serving.serving_failure(store, result(working, None, True)) is None
