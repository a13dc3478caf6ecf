"""The gateway's recorder redacts a call once and commits it whichever way it goes: on the event loop, or
redacted there, refused by a busy store and then committed by the writer thread (gateway/recorder.py)."""

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


class CountingRedactor(Redactor):
    def __init__(self) -> None:
        super().__init__(DEFAULT_REDACTIONS)
        self.scans = 0

    def findall(self, *values: object) -> set[str]:
        self.scans += 1
        return super().findall(*values)


def _call(rollout_id: str, text: str) -> NewCall:
    return NewCall(rollout_id=rollout_id, api=ApiKind.CHAT, status=CallStatus.OK,
                   request={"messages": [{"role": "user", "content": text}]}, response={"choices": []},
                   prompt_token_ids=[1, 2, 3], choices=[ChoiceTokens([4], [-0.5], "stop")], policy_version=0)


def test_a_call_refused_on_the_loop_is_committed_by_the_thread_redacted_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    redactor = CountingRedactor()
    recorder = Recorder(store, redactor)
    recorder.start()
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
        waiting = asyncio.ensure_future(recorder.record(_call(rid, f"my key is {SECRET}")))
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
    assert redactor.scans == 2  # each call scanned once, though the second was redacted on the loop first
    stored = store.get_calls(rid)[1].request["messages"][0]["content"]
    assert SECRET not in stored and stored == f"my key is {REPLACEMENT}"
    store.close()


def test_calls_pending_at_stop_are_committed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
    recorder = Recorder(store, Redactor(DEFAULT_REDACTIONS))
    recorder.start()

    async def main() -> None:
        recorder.record_nowait(_call(rid, "a"))  # the client left: nobody waits for it
        recorder.record_nowait(_call(rid, "b"))
        recorder.stop()  # before the loop turn that would have flushed them

    asyncio.run(main())
    assert [c.request["messages"][0]["content"] for c in store.get_calls(rid)] == ["a", "b"]
    store.close()
