"""Fault 2: the disk under the SQLite store fills up, then space comes back.

The store lives on a 4 MiB tmpfs the test mounts. With the disk full, a call must be refused with a 503
that says why (not a 500 or a dropped connection), nothing half-written may reach the store, and once
space is freed the same gateway process records again by itself. The trainer's checkpoint write on a
full disk fails without touching the previous checkpoint.
"""

from __future__ import annotations

import sqlite3

import httpx
import orjson
import pytest
import torch
from fakes.fake_engine import EngineServer, FakeEngine
from faultkit import fill
from safetensors import SafetensorError

from harnessrl.store import open_store
from harnessrl.training import trainer_state as ckpt
from harnessrl.types import CallStatus
from harnessrl.weights.checkpoints import latest_checkpoint, save_checkpoint_atomic


def chat(r: dict, text: str, stream: bool = False) -> httpx.Response:
    return httpx.post(f"{r['base_url']}/chat/completions", headers={"Authorization": f"Bearer {r['api_key']}"},
                      json={"model": "m", "messages": [{"role": "user", "content": text}], "stream": stream},
                      timeout=30)


@pytest.mark.slow
def test_disk_full_refuses_with_503_writes_nothing_half_and_recovers(small_fs, gateway_procs):
    engine = EngineServer(FakeEngine(completion_len=64)).start()
    try:
        db = small_fs / "gw.db"
        gw = gateway_procs(f"sqlite:///{db}", [engine.url])
        r = gw.rollout()
        ok_before = [f"before {i} " + "x" * 2000 for i in range(5)]
        for text in ok_before:
            assert chat(r, text).status_code == 200
        filler = fill(small_fs)

        # the disk is full: every call is answered 200 (recorded) or refused 503 with the cause; a 500 or
        # a dropped connection fails the test. WAL pages already allocated may absorb a few calls.
        answered, refused = [], []
        for i in range(60):
            text = f"full {i} " + "y" * 4000
            stream = i % 2 == 1
            resp = chat(r, text, stream=stream)
            if resp.status_code == 200 and not stream:
                answered.append(text)
                continue
            if stream and resp.status_code == 200:
                body = resp.text
                if "data: [DONE]" in body and '"error"' not in body:
                    answered.append(text)
                    continue
                assert "disk" in body.lower() or "store" in body.lower(), body[-500:]
                refused.append(text)
                continue
            assert resp.status_code == 503, (resp.status_code, resp.text[:500])
            err = resp.json()["error"]
            assert "store" in err["message"].lower() and ("full" in err["message"].lower()
                                                          or "space" in err["message"].lower()), err
            refused.append(text)
            if len(refused) >= 6:
                break
        assert refused, "60 calls of 4 KB each were all recorded on a full 4 MiB disk?"
        assert gw.proc.poll() is None, "the gateway died on a full disk"

        # space comes back: the same process records again, without a restart
        filler.unlink()
        after = chat(r, "after the disk was freed")
        assert after.status_code == 200, after.text
        streamed = chat(r, "streamed after the disk was freed", stream=True)
        assert streamed.status_code == 200 and "data: [DONE]" in streamed.text

        store = open_store(f"sqlite:///{db}")
        try:
            calls = store.get_calls(r["rollout_id"])
            texts = [c.request["messages"][-1]["content"] for c in calls if c.status == CallStatus.OK]
            # every answered call is stored once; no refused call is stored as answered
            for t in [*ok_before, *answered, "after the disk was freed", "streamed after the disk was freed"]:
                assert texts.count(t) == 1, t[:20]
            assert not set(texts) & set(refused)
            assert [c.index for c in calls] == list(range(len(calls))), "call indices have a hole"
            for c in calls:
                if c.status == CallStatus.OK:
                    assert len(c.completion_token_ids) == 65  # 64 tokens + END: whole, never half
        finally:
            store.close()
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        engine.stop()


class _Trainer:
    """What ``save_checkpoint_atomic`` needs of a trainer: ``save_checkpoint(path)``."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(256, 256)  # 257 KiB of fp32 weights, ~0.8 MiB with Adam state
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.step = 0

    def train_step(self) -> None:
        self.step += 1
        loss = self.model(torch.randn(4, 256)).square().mean()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()

    def save_checkpoint(self, path):  # noqa: ANN001, ANN201
        return ckpt.save_checkpoint(path, self.model, self.optimizer, {"step": self.step, "policy_version": 0})


def test_checkpoint_write_on_a_full_disk_keeps_the_previous_checkpoint(small_fs):
    run_dir = small_fs / "run"
    trainer = _Trainer()
    trainer.train_step()
    first = save_checkpoint_atomic(trainer, run_dir, 1)
    saved = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train_step()
    filler = fill(small_fs)
    with pytest.raises((OSError, SafetensorError), match="No space left"):
        save_checkpoint_atomic(trainer, run_dir, 2)
    filler.unlink()

    assert latest_checkpoint(run_dir) == first, "a half-written step_2 counts as a checkpoint"
    fresh = _Trainer()
    state = ckpt.load_checkpoint(first, fresh.model, fresh.optimizer)
    assert state["step"] == 1
    for k, v in fresh.model.state_dict().items():
        assert torch.equal(v, saved[k])
    # with space back, the next attempt writes step_2 whole (the stale .tmp is replaced)
    second = save_checkpoint_atomic(trainer, run_dir, 2)
    assert latest_checkpoint(run_dir) == second
    assert orjson.loads((second / ckpt.STATE).read_bytes())["step"] == 2
