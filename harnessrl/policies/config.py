"""``[policies.<name>]`` and ``[routing]``: which policies a run trains and which calls each one serves.

A run without ``[policies]`` has one policy, exactly as before. With them, every call a harness makes is
routed to one named policy (by the model name it asks for, a header, or the default); each trained policy
is its own LoRA adapter on the shared base model, with its own optimizer, estimator, normalization and
version. A ``frozen`` policy is served and recorded but never trained (a fixed judge or tool model).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection
from harnessrl.training.config import LoraConfig

#: The header a harness may set to name the policy of one call (beats the model name).
DEFAULT_HEADER = "x-harnessrl-policy"


class PolicyConfig(ConfigSection):
    """One policy. Unset fields take ``[training]``'s values, so a policy only says how it differs."""

    frozen: bool = Field(False, description="Served and recorded, never trained (its calls are left out of "
                                            "every batch).")
    lora: LoraConfig | None = Field(None, description="Adapter settings; None: [training.lora].")
    lr: float | None = Field(None, gt=0, description="AdamW learning rate; None: [training] lr.")
    estimator: Literal["grpo", "dr_grpo", "rloo"] | None = Field(
        None, description="Advantage estimator; None: [training] estimator.")
    normalization: Literal["rollout", "token", "sequence"] | None = Field(
        None, description="Loss normalization inside this policy's batch; None: [training] normalization.")
    reward_name: str | None = Field(
        None, description="A named reward the harness or verifier posts for this policy (credit by role). "
        "When a rollout has it, it is this policy's reward for that rollout; otherwise the rollout's reward "
        "(shared credit).")
    engine_model: str | None = Field(
        None, description="Frozen policies only: the model name sent to the engines (default: the base, "
        "served without any adapter).")


class RoutingConfig(ConfigSection):
    """How a call finds its policy: header, then requested model name, then a policy of that name, then
    the default (or a refusal)."""

    models: dict[str, str] = Field(
        default_factory=dict, description='Requested model name -> policy, e.g. {"gpt-4o-mini" = "summarizer"}.')
    header: str = Field(DEFAULT_HEADER, description="Request header naming the policy outright.")
    default: str | None = Field(None, description="Policy of calls that match nothing; None: the first policy.")
    unmatched: Literal["default", "refuse"] = Field(
        "default", description="A call matching no route: served by the default policy, or refused (404, "
        "OpenAI error shape, code model_not_found).")


class ServedPolicy(ConfigSection):
    """What the gateway needs of one policy: whether it trains and which engine model serves it."""

    frozen: bool = False
    engine_model: str | None = Field(
        None, description="Model name sent to the engines for this policy (the embedded engine: the policy "
        "name, its adapter; vLLM: the adapter loaded last for it); None: the gateway's engine_model.")
