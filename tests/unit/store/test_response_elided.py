"""A response's copy of the call's prompt token IDs is stored once: the row's ``response`` leaves it out,
``response_elided`` says where it was, and every reader gets the response back as it was recorded.

A client that asks for token IDs (vLLM's ``return_token_ids``) is sent the whole prompt's IDs in each answer:
chat puts them at the top level, completions in each choice. With a long agent prompt that copy was most of
the row, and encoding and writing it most of what a call cost the store."""

from __future__ import annotations

import copy
import time

import orjson

from harnessrl.store import Store
from harnessrl.store.rows import elide_prompt, restore_prompt
from harnessrl.types import ApiKind, RolloutStatus

from ._helpers import make_call

PROMPT = list(range(1000, 6000))  # 5,000 tokens


def _row(store: Store, rid: str, index: int) -> dict:
    with store._read() as conn:  # type: ignore[attr-defined]  # the drivers' own connection: the raw row
        p = store.P  # type: ignore[attr-defined]
        row = conn.execute(f"SELECT response, response_elided FROM calls WHERE rollout_id = {p} AND call_index = {p}",
                           (rid, index)).fetchone()
        return {"response": row["response"], "response_elided": row["response_elided"]}


def test_a_chat_answer_with_the_prompt_ids_is_stored_without_them_and_read_back_whole(store: Store) -> None:
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    call = make_call(rid, PROMPT, [7, 8, 9])
    call.response = {"id": "c1", "prompt_token_ids": list(PROMPT),
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                  "token_ids": [7, 8, 9]}]}
    sent = copy.deepcopy(call.response)
    store.record_calls([call])
    assert call.response == sent  # what the harness was sent is not changed by storing it
    raw = _row(store, rid, 0)
    assert "prompt_token_ids" not in orjson.loads(raw["response"])
    assert len(raw["response"]) < 200  # not 5,000 IDs
    assert orjson.loads(raw["response_elided"]) == [["prompt_token_ids"]]
    (got,) = store.get_calls(rid)
    assert got.response == sent
    assert store.get_call(rid, 0).response == sent


def test_completions_choices_each_with_the_prompt_ids(store: Store) -> None:
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    call = make_call(rid, PROMPT, [7], [8])
    call.api = ApiKind.COMPLETIONS
    call.response = {"id": "c1", "choices": [
        {"index": 0, "text": "a", "prompt_token_ids": list(PROMPT), "token_ids": [7]},
        {"index": 1, "text": "b", "prompt_token_ids": list(PROMPT), "token_ids": [8]}]}
    sent = copy.deepcopy(call.response)
    store.record_calls([call])
    raw = _row(store, rid, 0)
    assert orjson.loads(raw["response_elided"]) == [["choices", 0, "prompt_token_ids"],
                                                    ["choices", 1, "prompt_token_ids"]]
    assert store.get_calls(rid)[0].response == sent


def test_ids_that_are_not_the_prompt_are_kept_as_they_are(store: Store) -> None:
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    other = make_call(rid, PROMPT, [7])
    other.response = {"prompt_token_ids": PROMPT[:-1] + [0], "choices": []}  # e.g. the prompt redacted since
    empty = make_call(rid, [], [7])
    empty.response = {"prompt_token_ids": [], "choices": []}
    store.record_calls([other, empty])
    for index, call in enumerate((other, empty)):
        assert _row(store, rid, index)["response_elided"] is None
        assert store.get_call(rid, index).response == call.response


def test_a_purged_call_has_no_elided_paths_left(store: Store) -> None:
    run = store.create_run("r", {})
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run.id).id
    call = make_call(rid, PROMPT, [7])
    call.response = {"prompt_token_ids": list(PROMPT), "choices": []}
    store.record_calls([call])
    assert _row(store, rid, 0)["response_elided"] is not None
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.transition_rollout(rid, RolloutStatus.SUCCEEDED)
    store.end_run(run.id)
    assert store.purge(finished_before=time.time() + 60, dry_run=False).calls == 1
    assert _row(store, rid, 0) == {"response": None, "response_elided": None}
    assert store.get_calls(rid)[0].response is None


def test_elide_and_restore_are_inverse_and_leave_the_input_alone() -> None:
    prompt = [1, 2, 3]
    resp = {"prompt_token_ids": [1, 2, 3], "choices": [{"prompt_token_ids": [1, 2, 3]}, {"prompt_token_ids": [1]}],
            "x": 1}
    before = copy.deepcopy(resp)
    stored, paths = elide_prompt(resp, prompt)
    assert resp == before
    assert stored == {"choices": [{}, {"prompt_token_ids": [1]}], "x": 1}
    assert restore_prompt(orjson.loads(orjson.dumps(stored)), paths, prompt) == before
    assert elide_prompt(None, prompt) == (None, [])
    assert elide_prompt({"prompt_token_ids": [1, 2, 3]}, []) == ({"prompt_token_ids": [1, 2, 3]}, [])
