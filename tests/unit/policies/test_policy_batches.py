"""Per-policy batches: each policy trains only the calls routed to it; credit is the rollout's reward
(shared) unless the rollout carries the policy's own named reward; advantages are per group inside each
policy's batch."""

from __future__ import annotations

import pytest
from run_config import write_run_config

from harnessrl.config import ConfigError, HarnessConfig, load_config
from harnessrl.policies.config import PolicyConfig
from harnessrl.policies.trainers import PolicyTrainers, credit, policy_training_config
from harnessrl.training.config import TrainingConfig
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens, Reward, Rollout, RolloutStatus


def _rollout(rid: str) -> Rollout:
    return Rollout(id=rid, run_id=None, task_id="t", group_id="g", input={}, status=RolloutStatus.SUCCEEDED,
                   policy_version=0)


def _call(rid: str, index: int, policy: str, prompt: list[int]) -> Call:
    return Call(rollout_id=rid, index=index, api=ApiKind.CHAT, status=CallStatus.OK, request={},
                response={}, prompt_token_ids=prompt,
                choices=[ChoiceTokens(token_ids=[7, 8], logprobs=[-0.1, -0.2], finish_reason="stop")],
                policy_version=0, sampling={"policy": policy})


def _trainers(**policies: PolicyConfig) -> PolicyTrainers:
    base = TrainingConfig()
    configs = {n: policy_training_config(base, p) for n, p in policies.items()}
    return PolicyTrainers({n: object() for n in policies}, configs, dict(policies))


def test_each_policy_gets_its_own_calls_and_credit() -> None:
    pt = _trainers(planner=PolicyConfig(reward_name="plan_ok"), solver=PolicyConfig(estimator="dr_grpo"))
    items = []
    for i, (final, plan_ok) in enumerate([(1.0, 0.0), (0.0, 1.0)]):
        rid = f"r{i}"
        rewards = [Reward(rid, final, name="final", created_at=1.0)]
        rewards.append(Reward(rid, plan_ok, name="plan_ok", created_at=2.0))
        items.append((_rollout(rid), [_call(rid, 0, "planner", [1, 2, 3]), _call(rid, 1, "solver", [4, 5])],
                      rewards))
    batches = pt.prepare(items).batches
    assert {s.rollout_id for s in batches["planner"].samples} == {"r0", "r1"}
    assert all(s.call_indices == [0] for s in batches["planner"].samples)  # only the planner's calls
    assert all(s.call_indices == [1] for s in batches["solver"].samples)
    assert batches["planner"].rewards == {"r0": 0.0, "r1": 1.0}  # its own named reward (credit by role)
    assert batches["solver"].rewards == {"r0": 1.0, "r1": 0.0}  # the rollout's reward (shared credit)
    assert batches["solver"].advantages == {"r0": 0.5, "r1": -0.5}  # dr_grpo: r - mean, within its batch
    assert batches["planner"].advantages["r1"] > 0 > batches["planner"].advantages["r0"]


def test_credit_falls_back_to_the_rollout_reward() -> None:
    rewards = [Reward("r", 1.0, name="final")]
    assert credit(rewards, "plan_ok") == rewards
    assert credit(rewards, None) == rewards


def test_policy_overrides_training() -> None:
    cfg = policy_training_config(TrainingConfig(lr=1e-5), PolicyConfig(lr=3e-4, normalization="token"))
    assert cfg.lr == 3e-4 and cfg.normalization == "token" and cfg.estimator == "grpo"
    with pytest.raises(ValueError, match="LoRA"):
        policy_training_config(TrainingConfig(lora=None), PolicyConfig())


def test_config_sections(tmp_path) -> None:
    path = write_run_config(tmp_path, {
        "policies": {"planner": {}, "solver": {"lr": 1e-4}, "judge": {"frozen": True}},
        "routing": {"models": {"plan": "planner"}, "default": "solver", "unmatched": "refuse"}})
    cfg = load_config(path)
    assert list(cfg.policies) == ["planner", "solver", "judge"] and cfg.routing.default == "solver"
    assert HarnessConfig().policies == {}  # no section: one policy, as before
    write_run_config(path, {"policies": {"planner": {}}, "routing": {"models": {"x": "coder"}}})
    with pytest.raises(ConfigError, match="does not define"):
        load_config(path)
    write_run_config(path, {"policies": {"judge": {"frozen": True}}})
    with pytest.raises(ConfigError, match="frozen"):
        load_config(path)


def test_vllm_max_loras_covers_every_trained_policy(tmp_path) -> None:
    path = write_run_config(tmp_path, {"policies": {"a": {}, "b": {}, "c": {"frozen": True}}})
    assert load_config(path).engine.vllm.max_loras == 2
    write_run_config(path, {"engine": {"vllm": {"max_loras": 1}}, "policies": {"a": {}, "b": {}}})
    with pytest.raises(ConfigError, match="max_loras"):
        load_config(path)
