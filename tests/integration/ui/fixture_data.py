"""A small, realistic store for the dashboard tests, written through the real store API.

One run with two steps of rollouts: multi-turn calls whose prompts extend the previous call (merged
samples), a call where the harness rewrote history (a split), an errored call, rewards (incl. ``final``),
runner logs with markup in them, and an XSS payload in a prompt. Run directory files as ``harnessrl train``
writes them: two of three steps done, evaluations before and after, counts that match the store.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from harnessrl.store import Store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens, FailureKind, Fidelity, RolloutStatus

XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=1">'


@dataclass
class Fixture:
    run_id: str
    run_dir: Path
    rollouts: list[str]
    rich: str  # the rollout with merged + split samples


def _call(rid: str, prompt: list[int], completion: list[int], messages: list[dict], *, version: int = 0,
          status: CallStatus = CallStatus.OK, fidelity: str | None = "rerendered", reason: str | None = None) -> NewCall:
    lps = [-0.05 * (k + 1) if k % 3 else -3.0 for k in range(len(completion))]
    answer = "".join(chr(97 + (t % 26)) for t in completion)
    return NewCall(
        rollout_id=rid, api=ApiKind.CHAT, status=status,
        request={"model": "policy", "messages": messages},
        response=None if status != CallStatus.OK else {
            "id": "c", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}]},
        prompt_token_ids=prompt,
        choices=[ChoiceTokens(completion, lps, "stop")] if status == CallStatus.OK else [],
        policy_version=version, requested_model="policy", sampling={"temperature": 1.0},
        engine_id="e0", latency_s=0.25, error=None if status == CallStatus.OK else "engine said no",
        fidelity=None if fidelity is None else Fidelity(fidelity),
        fidelity_reason=reason)


def metrics_row(step: int) -> dict[str, float | int]:
    """A ``metrics.jsonl`` row with a name from each of the run page's groups; ``advantage/mean`` is float
    noise (advantages that sum to zero), as the trainer writes it. Steps 1 and 2 ran 3 and 4 attempts
    (the store's) and trained 2 and 3 of them."""
    return {"step": step, "loss": 0.5 / step, "clip_fraction": 0.1 * step, "approx_kl": math.log1p(step) / 100,
            "reward/mean": 0.25 * step + 0.25, "advantage/mean": 1.3877787807814457e-17 * step,
            "count/groups.trained": 2 + step, "samples/merged": 3, "count/calls.merged": 4 * step,
            "count/dynamic.attempts": 2 + step, "count/rollouts.trained": 1 + step,
            "policy/coder/loss": 0.4 / step}


def build(store: Store, root: Path, *, model: str = "tiny") -> Fixture:
    run_dir = root / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"run": {"name": "demo", "dir": str(run_dir), "steps": 3}, "engine": {"model": model},
              "training": {"samples": {"max_sequence_length": 4096}}}
    run = store.create_run("demo", config)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run.id}))
    ids: list[str] = []
    for step in (1, 2):
        for i in range(3):
            r = store.create_rollout(task_id=f"task-{i}", input={"q": f"question {i}"}, group_id=f"g{step}-{i}",
                                     api_key_hash="h", policy_version=step - 1, run_id=run.id, step=step)
            ids.append(r.id)
            store.transition_rollout(r.id, RolloutStatus.RUNNING, runner_handle=f"pid:{1000 + len(ids)}")
            base = [1, 2, 3, 10 + i]
            first = _call(r.id, base, [40, 41, 42, 43], [{"role": "user", "content": f"question {i}"}])
            second = _call(r.id, [*base, 40, 41, 42, 43, 7, 8], [50, 51, 52],
                           [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": "x"},
                            {"role": "tool", "content": "ok", "tool_call_id": "t1"}],
                           fidelity="extended", reason="reused 8 tokens of call 0")
            store.record_calls([first])
            store.record_calls([second])
            value = (i + step) / 4
            store.add_reward(r.id, value, "final")
            if i == 2 and step == 2:
                store.transition_rollout(r.id, RolloutStatus.FAILED, failure_kind=FailureKind.AGENT,
                                         exit_code=1, logs="Traceback: <b>boom</b>\n", error="harness exited 1")
            else:
                store.transition_rollout(r.id, RolloutStatus.SUCCEEDED, exit_code=0, logs=f"done {i}\n")
    rich = store.create_rollout(task_id="task-x", input={"q": XSS}, group_id="gx", api_key_hash="h",
                                run_id=run.id, step=2, policy_version=1)
    store.transition_rollout(rich.id, RolloutStatus.RUNNING)
    store.record_calls([_call(rich.id, [1, 2, 3], [60, 61, 62, 63, 64], [{"role": "user", "content": XSS}])])
    store.record_calls([_call(rich.id, [1, 2, 3, 60, 61, 62, 63, 64, 9], [70, 71],
                              [{"role": "user", "content": XSS}, {"role": "assistant", "content": "y"}],
                              version=1, fidelity="extended", reason="reused 8 tokens of call 0")])
    store.record_calls([_call(rich.id, [1, 2, 5, 6], [80, 81, 82],
                              [{"role": "user", "content": "summary of the above"}], version=1,
                              reason="no earlier call is a prefix")])
    store.record_calls([_call(rich.id, [1, 2, 5, 6, 80, 81, 82, 4], [], [{"role": "user", "content": "again"}],
                              version=1, status=CallStatus.ERROR, fidelity=None)])
    store.add_reward(rich.id, 0.25, "format", call_index=1)
    store.add_reward(rich.id, 0.75, "final")
    store.transition_rollout(rich.id, RolloutStatus.SUCCEEDED, exit_code=0, logs=XSS)
    store.add_policy_version(1, str(run_dir / "checkpoints" / "step_000001"), run_id=run.id, metadata={"step": 1})
    store.add_policy_version(2, str(run_dir / "checkpoints" / "step_000002"), run_id=run.id, metadata={"step": 2})
    with (run_dir / "metrics.jsonl").open("w") as f:
        for step in (1, 2):
            f.write(json.dumps(metrics_row(step)) + "\n")
    t0 = 1_700_000_000.0
    with (run_dir / "events.jsonl").open("w") as f:
        f.write(json.dumps({"event": "eval", "time": t0, "policy_version": 0, "mean_reward": 0.2, "tasks": 4,
                            "infra_failures": 0}) + "\n")
        for step in (1, 2):  # as the controller counts them from the store (step 2 holds the rich rollout)
            f.write(json.dumps({"event": "step", "time": t0 + 10 * step, "step": step, "policy_version": step,
                                "rollouts": 3 + step - 1, "failed": step - 1, "infra": 0,
                                "reward_mean": 0.25 * step + 0.25, "stale_dropped": 0,
                                "seconds": {"rollouts": 3.0 * step, "train": 1.5, "publish": 0.5}}) + "\n")
        f.write(json.dumps({"event": "eval", "time": t0 + 25, "policy_version": 2, "mean_reward": 0.6, "tasks": 3,
                            "infra_failures": 1}) + "\n")
    return Fixture(run.id, run_dir, ids + [rich.id], rich.id)
