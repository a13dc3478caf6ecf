"""Many writer threads, readers alongside, reopening, and a writer process killed mid-load."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from harnessrl.store import Store, open_store
from harnessrl.types import RolloutStatus

from ._helpers import make_call


def test_threads_recording_into_shared_rollouts(store: Store, new_rollout: Callable[..., str]) -> None:
    rollouts = [new_rollout() for _ in range(20)]
    threads_n, batches_n = 6, 25
    acked: dict[tuple[int, int], tuple[str, int, list[int]]] = {}
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(t: int) -> None:
        rng = random.Random(t)
        try:
            for b in range(batches_n):
                batch = []
                for k in range(rng.randint(1, 4)):
                    rid = rng.choice(rollouts)
                    prompt = [7, 7, 7, t, b, k] + [rng.randrange(50_000) for _ in range(rng.randint(0, 5))]
                    batch.append(make_call(rid, prompt, [t, b], request={"t": t, "b": b, "k": k}))
                for new, index in zip(batch, store.record_calls(batch), strict=True):
                    r = new.request
                    acked[(t, b * 10 + r["k"])] = (new.rollout_id, index, new.prompt_token_ids)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            try:
                for call in store.get_calls(random.choice(rollouts)):
                    assert call.prompt_token_ids[:3] == [7, 7, 7]
                store.list_rollouts(limit=5)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
                return

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for th in workers + readers:
        th.start()
    for th in workers:
        th.join()
    stop.set()
    for th in readers:
        th.join()
    assert not errors, errors[:3]

    stored = {}
    for rid in rollouts:
        calls = store.get_calls(rid)
        assert [c.index for c in calls] == list(range(len(calls)))  # dense, unique, in order
        stored.update({(rid, c.index): c for c in calls})
    assert len(stored) == len(acked)  # none lost, none duplicated
    for (t, key), (rid, index, prompt) in acked.items():
        call = stored[(rid, index)]
        assert (call.request["t"], call.request["b"] * 10 + call.request["k"]) == (t, key)
        assert call.prompt_token_ids == prompt


def test_everything_survives_reopen(store_url: str, store: Store) -> None:
    run = store.create_run("r", {"x": 1})
    rid = store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h", run_id=run.id).id
    store.record_calls([make_call(rid, [1, 2], [3]), make_call(rid, [1, 2, 3, 4], [5])])
    store.transition_rollout(rid, RolloutStatus.RUNNING)
    store.add_reward(rid, 0.5)
    store.add_policy_version(1, "/ckpt", run_id=run.id)
    expected = (store.get_run(run.id), store.get_rollout(rid), store.get_calls(rid), store.get_rewards(rid))
    store.close()
    again = open_store(store_url)
    try:
        assert (
            again.get_run(run.id),
            again.get_rollout(rid),
            again.get_calls(rid),
            again.get_rewards(rid),
        ) == expected
        assert again.list_policy_versions(run.id)[0].checkpoint_path == "/ckpt"
    finally:
        again.close()


_CHILD = """
import sys
from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

store = open_store(sys.argv[1])
rollouts = sys.argv[2].split(",")
prompts = {r: [1, 2, 3] for r in rollouts}
i = 0
while True:
    batch = []
    for r in rollouts[i % 3 :: 3]:
        prompts[r] = prompts[r] + [i, i + 1]
        batch.append(NewCall(r, ApiKind.CHAT, CallStatus.OK, {"i": i}, None, prompts[r],
                             [ChoiceTokens([i], [-0.5])], 0))
        prompts[r].append(i)
    for call, index in zip(batch, store.record_calls(batch)):
        sys.stdout.write(f"{call.rollout_id} {index} {i}\\n")
    sys.stdout.flush()
    i += 1
"""


def test_acknowledged_calls_survive_sigkill(
    store_url: str, store: Store, new_rollout: Callable[..., str]
) -> None:
    """A writer process killed mid-load loses nothing that record_calls had returned for."""
    rollouts = [new_rollout() for _ in range(6)]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, store_url, ",".join(rollouts)], stdout=subprocess.PIPE, text=True
    )
    acked: list[tuple[str, int, int]] = []
    assert child.stdout is not None
    for line in child.stdout:
        rid, index, i = line.split()
        acked.append((rid, int(index), int(i)))
        if len(acked) >= 300:
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    calls = {rid: store.get_calls(rid) for rid in rollouts}
    for rid, index, i in acked:
        assert calls[rid][index].request == {"i": i}
        assert calls[rid][index].completion_token_ids == [i]
    for rid in rollouts:  # committed but unacknowledged calls may exist; they are whole and dense
        assert [c.index for c in calls[rid]] == list(range(len(calls[rid])))
        assert all(c.prompt_token_ids[:3] == [1, 2, 3] for c in calls[rid])
