"""Which way the gateway's recorder commits a call (gateway/recorder.py): on the event loop when there is
nothing to redact and the store can without waiting; by the writer thread when the call holds a secret (its
token scan can take 100 ms) or the store refuses; and nothing is lost when it stops."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from harnessrl.gateway.recorder import Recorder
from harnessrl.redaction.text import DEFAULT_REDACTIONS, REPLACEMENT, Redactor
from harnessrl.store.base import NewCall
from harnessrl.store.sqlite import SqliteStore
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

SECRET = "sk-" + "a1B2" * 8


def _call(rollout_id: str, text: str) -> NewCall:
    return NewCall(rollout_id=rollout_id, api=ApiKind.CHAT, status=CallStatus.OK,
                   request={"messages": [{"role": "user", "content": text}]}, response={"choices": []},
                   prompt_token_ids=[1, 2, 3], choices=[ChoiceTokens([4], [-0.5], "stop")], policy_version=0)


def _started(tmp_path: Path) -> tuple[SqliteStore, str, Recorder]:
    """A store with one rollout, and a started recorder on it (the gateway's default: "auto")."""
    store = SqliteStore(tmp_path / "s.db")
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    recorder = Recorder(store, Redactor(DEFAULT_REDACTIONS))
    recorder.start()
    return store, rid, recorder


def test_a_call_with_a_secret_is_redacted_by_the_thread_not_on_the_loop(tmp_path: Path) -> None:
    store, rid, recorder = _started(tmp_path)

    async def main() -> list[int]:
        return [await recorder.record(_call(rid, text)) for text in ("plain", f"my key is {SECRET}", "plain again")]

    try:
        assert asyncio.run(main()) == [0, 1, 2]
    finally:
        recorder.stop()
    # the first on the loop; the secret's call and every later call of its rollout (the key is known there:
    # a part of it must be found too) on the thread, where decoding tokens cannot stall other calls
    assert recorder.batches == 3 and recorder.batches_on_loop == 1 and recorder.recorded == 3
    stored = [c.request["messages"][0]["content"] for c in store.get_calls(rid)]
    assert stored == ["plain", f"my key is {REPLACEMENT}", "plain again"]
    store.close()


def test_a_call_the_busy_store_refuses_is_committed_by_the_thread(tmp_path: Path) -> None:
    store, rid, recorder = _started(tmp_path)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            held.set()
            release.wait(30)

    async def main() -> list[int]:
        first = await recorder.record(_call(rid, "plain"))  # on the loop
        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        waiting = asyncio.ensure_future(recorder.record(_call(rid, "while held")))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # refused on the loop, queued for the thread, which waits for the store
        release.set()
        second = await asyncio.wait_for(waiting, 30)
        holder.join()
        return [first, second]

    try:
        assert asyncio.run(main()) == [0, 1]
    finally:
        recorder.stop()
    assert recorder.batches_on_loop == 1 and recorder.batches == 2 and recorder.recorded == 2
    store.close()


def test_calls_pending_at_stop_are_committed(tmp_path: Path) -> None:
    store, rid, recorder = _started(tmp_path)

    async def main() -> None:
        recorder.record_nowait(_call(rid, "a"))  # the client left: nobody waits for it
        recorder.record_nowait(_call(rid, "b"))
        recorder.stop()  # before the loop turn that would have flushed them

    asyncio.run(main())
    assert [c.request["messages"][0]["content"] for c in store.get_calls(rid)] == ["a", "b"]
    store.close()


def test_token_id_arrays_are_not_searched_as_text(tmp_path: Path) -> None:
    """A pattern that matches digits does not match a response's token IDs (they hold no text; the token
    redactor decodes them), so the call is committed on the loop with its IDs intact; a secret in the text
    beside them is still found and redacted."""
    store = SqliteStore(tmp_path / "s.db")
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    recorder = Recorder(store, Redactor([*DEFAULT_REDACTIONS, r"101,102,103"]))
    recorder.start()

    def call(content: str) -> NewCall:
        c = _call(rid, "plain")
        c.response = {"choices": [{"message": {"content": content}, "token_ids": [101, 102, 103]}],
                      "prompt_token_ids": [7, 101, 102, 103]}
        return c

    async def main() -> list[int]:
        return [await recorder.record(call(text)) for text in ("fine", f"key {SECRET}")]

    try:
        assert asyncio.run(main()) == [0, 1]
    finally:
        recorder.stop()
    assert recorder.batches_on_loop == 1  # the first: nothing to redact
    first, second = (c.response for c in store.get_calls(rid))
    assert first["prompt_token_ids"] == [7, 101, 102, 103] and first["choices"][0]["token_ids"] == [101, 102, 103]
    assert second["choices"][0]["message"]["content"] == f"key {REPLACEMENT}"
    store.close()
