"""Several processes write the same rollouts of one PostgreSQL store directly, with no retries.

Indices must be assigned atomically per rollout across processes (a collision would surface as an
error here, not be retried away as the gateway's recorder would), batches spanning many rollouts must
not deadlock, and each process's token cache must notice calls the others wrote in between.
"""

from __future__ import annotations

import subprocess
import sys

from harnessrl.store import open_store

PROCESSES, BATCHES, ROLLOUTS = 3, 30, 4

_CHILD = """
import random, sys
from harnessrl.store import open_store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

url, p, rollouts, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
store = open_store(url)
print("ready", flush=True)
sys.stdin.readline()  # start together, so that the processes really interleave
rng = random.Random(p)
full = {r: [p, 1000 + p] for r in rollouts}  # this process's chain in each rollout: prompt + completion
for b in range(batches):
    batch = []
    for r in rng.sample(rollouts, rng.randint(1, len(rollouts))):  # random order: locks must not deadlock
        prompt = full[r] + [b, (p * 7919 + b * 31) % 5000]
        batch.append(NewCall(r, ApiKind.CHAT, CallStatus.OK, {"p": p, "b": b}, None, prompt,
                             [ChoiceTokens([p, b], [-0.5, -1.0])], 0))
        full[r] = prompt + [p, b]
    for call, index in zip(batch, store.record_calls(batch)):
        print(call.rollout_id, index, p, b, flush=True)
    store.add_reward(rollouts[b % len(rollouts)], float(b), name=f"p{p}b{b}")
store.close()
"""


def test_processes_appending_to_the_same_rollouts(pg_url):
    store = open_store(pg_url)
    try:
        rollouts = [store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash="h").id
                    for _ in range(ROLLOUTS)]  # fmt: skip
        children = [
            subprocess.Popen([sys.executable, "-c", _CHILD, pg_url, str(p), ",".join(rollouts), str(BATCHES)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in range(PROCESSES)
        ]  # fmt: skip
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n", child.stderr
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        acked: dict[tuple[str, int], tuple[int, int]] = {}
        for child in children:
            assert child.stdout is not None and child.stderr is not None
            out, err = child.stdout.read(), child.stderr.read()
            assert child.wait(timeout=120) == 0, err[-3000:]
            for line in out.splitlines():
                rid, index, p, b = line.split()
                assert (rid, int(index)) not in acked, "two processes were given the same call index"
                acked[(rid, int(index))] = (int(p), int(b))

        switches = 0  # consecutive calls of a rollout written by different processes
        for rid in rollouts:
            calls = store.get_calls(rid)
            assert [c.index for c in calls] == list(range(len(calls)))
            switches += sum(a.request["p"] != b.request["p"] for a, b in zip(calls, calls[1:], strict=False))
            assert {(rid, c.index): (c.request["p"], c.request["b"]) for c in calls} == {
                k: v for k, v in acked.items() if k[0] == rid
            }
            full: dict[int, list[int]] = {}
            expected_bytes = 0
            for c in calls:  # rebuild what each process sent and stored
                p, b = c.request["p"], c.request["b"]
                first = p not in full
                prompt = full.get(p, [p, 1000 + p]) + [b, (p * 7919 + b * 31) % 5000]
                assert c.prompt_token_ids == prompt
                assert c.completion_token_ids == [p, b]
                full[p] = prompt + [p, b]
                expected_bytes += 4 * ((4 if first else 2) + 2 + 2)  # new prompt tokens, ids, logprobs
            assert store.storage_bytes(rid) == expected_bytes  # each call extends its own chain's last one
        assert switches >= ROLLOUTS * PROCESSES, f"the writers barely interleaved ({switches} switches)"
        rewards = [r.name for rid in rollouts for r in store.get_rewards(rid)]
        assert sorted(rewards) == sorted(f"p{p}b{b}" for p in range(PROCESSES) for b in range(BATCHES))
    finally:
        store.close()
