"""Training configuration: how recorded calls become samples, advantages, a loss and an update.

Every field has a default that trains a small model on a laptop CPU. The lead composes this model into
``HarnessConfig`` as the ``[training]`` TOML section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from harnessrl.config_base import ConfigSection

#: Where step metrics are mirrored besides ``<run_dir>/metrics.jsonl`` (see ``harnessrl.training.trackers``).
TrackerName = Literal["tensorboard", "wandb", "mlflow"]


class LoraConfig(ConfigSection):
    """LoRA adapter settings (peft). Adapters keep updates small enough to publish every step."""

    r: int = Field(16, ge=1, description="Adapter rank.")
    alpha: int = Field(32, ge=1, description="LoRA scaling numerator (scale = alpha / r).")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="Module names to adapt (the Llama/Qwen/Mistral projection names by default).",
    )


class SampleConfig(ConfigSection):
    """How a rollout's calls become training sequences (see ``harnessrl.training.samples``)."""

    max_sequence_length: int = Field(
        4096, ge=2, description="Longest training sequence in tokens (prompt context + completions)."
    )
    overflow: Literal["truncate", "drop"] = Field(
        "truncate",
        description="Over-long sequences: keep the first max_sequence_length tokens, or drop the sample. "
        "Either way they are counted in the step metrics.",
    )
    choices: Literal["first", "all"] = Field(
        "first",
        description="Which choices of an n>1 call to train: choice 0 only, or every choice (each extra "
        "choice becomes its own sample sharing the prompt as context).",
    )
    redacted: Literal["mask", "drop"] = Field(
        "mask",
        description="Calls whose tokens held a secret (replaced by a placeholder in the store, see "
        "docs/security.md): 'mask' trains them with the placeholder tokens under loss mask 0; 'drop' leaves "
        "such calls out. Either way they are counted in the step metrics.",
    )


class TrainingConfig(ConfigSection):
    """Everything the trainer needs; composed as the ``[training]`` section of the run config."""

    # -- samples ---------------------------------------------------------------------------------------
    samples: SampleConfig = Field(default_factory=SampleConfig, description="Sample building.")

    # -- advantages ------------------------------------------------------------------------------------
    estimator: Literal["grpo", "dr_grpo", "rloo"] = Field(
        "grpo",
        description="grpo: (r - mean) / (std + eps) over the group; dr_grpo: r - mean; "
        "rloo: r minus the mean of the other rollouts of the group.",
    )
    advantage_eps: float = Field(1e-6, gt=0, description="Added to the group std (grpo) to avoid 0/0.")
    reward_name: str | None = Field(
        None,
        description="Which named reward is the rollout's reward; None: `final` (what scoring combined from "
        "[rewards]) when the rollout has one, else the sum of its outcome rewards (latest value of each name).",
    )
    per_call_rewards: bool = Field(
        False,
        description="Use rewards attached to calls (call_index) as per-segment returns with `discount`; "
        "the outcome reward counts at the rollout's last call.",
    )
    discount: float = Field(1.0, ge=0.0, le=1.0, description="Discount per call for per-call rewards.")
    positive_weight: float = Field(
        1.0, gt=0.0, le=1.0,
        description="Scale of positive advantages (W-REINFORCE, Zhu et al. 2025): below 1 an attempt that beat "
        "its group is reinforced less than a worse one is penalized, so sampling is not drawn onto the first "
        "partly rewarded answer before a better one was found (docs/training.md section 7); 1 = off.",
    )
    drop_zero_variance_groups: bool = Field(
        True, description="Skip groups whose rewards are all equal (they carry no signal); reported."
    )
    replay_best: int = Field(
        0, ge=0,
        description="Success replay (self-imitation): up to this many attempts of earlier steps whose reward is "
        "above every reward of the current step are trained again in it, best first, with advantage (reward - "
        "the step's mean reward), divided by the step's std under grpo, at ratio 1 against the current policy. "
        "Replay stops once the policy reaches that reward itself (harnessrl/training/replay.py); 0 = off.",
    )

    # -- loss ------------------------------------------------------------------------------------------
    normalization: Literal["rollout", "token", "sequence"] = Field(
        "rollout",
        description="rollout: each rollout's tokens together weigh 1/num_rollouts, however many samples it "
        "split into; token: mean over all trained tokens; sequence: mean over samples.",
    )
    clip_eps: float = Field(0.2, ge=0.0, description="PPO clip range below 1 (ratio >= 1 - clip_eps).")
    clip_eps_high: float | None = Field(
        None, ge=0.0, description="PPO clip range above 1; None uses clip_eps (DAPO uses a larger one)."
    )
    tis_cap: float | None = Field(
        None,
        gt=0.0,
        description="Truncated importance sampling: weight each token by min(p_trainer/p_engine, cap) and "
        "clip the ratio against the trainer's own logprobs. None: ratio against the engine's logprobs.",
    )
    kl_coef: float = Field(0.0, ge=0.0, description="KL-to-reference penalty (k3 estimator); 0 = off.")
    entropy_metric: bool = Field(True, description="Compute the policy entropy on trained tokens (metric).")
    entropy_coef: float = Field(
        0.0, ge=0.0, description="Entropy bonus: the loss subtracts coef x the policy's entropy at each trained "
        "token (weighted as the token is), which slows the collapse of sampling onto one answer before a "
        "better one was found (docs/training.md section 7); 0 = off.")

    # -- optimisation ----------------------------------------------------------------------------------
    lr: float = Field(1e-5, gt=0, description="AdamW learning rate.")
    warmup_steps: int = Field(
        0, ge=0, description="Linear lr warmup over the first steps that update the weights: the k-th such step "
        "(from 0) trains at lr x (k + 1) / (warmup_steps + 1); a step with nothing to train does not count. "
        "AdamW's first update moves every parameter by about lr whatever the batch's signal (its moment estimates start from one gradient); warmup makes the first, least "
        "informed updates smaller. 0 = off.",
    )
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    grad_clip: float | None = Field(1.0, gt=0, description="Max global gradient norm; None = no clipping.")
    mini_batches: int = Field(
        1, ge=1, description="Optimizer updates per pass over a step's batch: its rollouts are split into this "
        "many mini-batches (whole rollouts, so a rollout's samples stay together; each mini-batch is "
        "normalized on its own). More updates per collected batch, at the cost of staleness.",
    )
    ppo_epochs: int = Field(
        1, ge=1, description="Passes over a step's batch (each pass takes mini_batches updates, in a fresh "
        "order). Later updates are off-policy; the PPO clip bounds them.",
    )
    lora: LoraConfig | None = Field(
        default_factory=LoraConfig,
        description="LoRA settings ([training.lora]); `lora = false` in TOML (None in Python) for full fine-tuning.",
    )
    micro_batch_tokens: int = Field(
        1024, ge=1, description="Token budget per micro-batch (gradients accumulate across micro-batches). "
        "Activation memory grows with it: about 2.5-3 MB per token for SmolLM2-135M with LoRA in fp32 "
        "(measured), so 4096 tokens peak near 11 GB on CPU.",
    )
    packing: Literal["packed", "padded"] = Field(
        "packed",
        description="packed: sequences concatenated without padding, position ids reset per sequence "
        "(transformers builds a block-diagonal mask; flash-attention uses varlen); padded: "
        "length-bucketed padding for models that do not support packed position ids.",
    )
    attention: Literal["auto", "varlen", "model"] = Field(
        "auto",
        description="Packed attention. auto: keep flash-attention when the model uses it (varlen kernels), "
        "else per-sample sdpa (harnessrl_varlen); varlen: always per-sample sdpa; model: leave the model's "
        "attention alone (sdpa then computes a dense block-diagonal mask: correct but wasteful).",
    )
    share_prefix_min: int | None = Field(
        16,
        ge=1,
        description="Pack a group's samples that share at least this many leading context tokens (the task "
        "prompt of the n attempts) behind one copy of that prefix; needs harnessrl_varlen attention "
        "(ignored with flash-attention). None: pack every sample whole.",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="auto: bf16 autocast (fp32 master weights) where the device multiplies bf16 natively "
        "(GPU; CPU with AVX512-BF16 or AMX), fp32 elsewhere."
    )
    device: str = Field("auto", description="auto: cuda when available, else cpu.")
    seed: int = Field(0, description="Seed for torch/python/numpy RNGs (saved in checkpoints).")
    gradient_checkpointing: bool = Field(
        False, description="Trade compute for memory (slow on CPU; off by default)."
    )
    compile: bool = Field(
        False, description="torch.compile each decoder layer (dynamic shapes), fusing its elementwise work: "
        "SmolLM2-135M LoRA in fp32 on a CPU trains 10-14% more tokens per CPU-second, after a one-time compile "
        "of ~40 CPU-s (docs/training.md section 5). For long runs: the demo's ten steps train for ~100 s in "
        "all, which the compile would not win back. Needs a C++ compiler on a CPU."
    )

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_false_is_full_finetuning(cls, value: object) -> object:
        """TOML has no null: ``lora = false`` is how a config file asks for full fine-tuning."""
        if value is False:
            return None
        if value is True:
            return LoraConfig()
        return value

    # -- experiment trackers ---------------------------------------------------------------------------
    trackers: list[TrackerName] = Field(
        default_factory=lambda: list[TrackerName](["tensorboard"]),
        description="Where step metrics and held-out evaluations are mirrored; <run_dir>/metrics.jsonl is "
        "always written. tensorboard: <run_dir>/tb; wandb: a W&B run; mlflow: an MLflow run (without "
        "MLFLOW_TRACKING_URI in <run_dir>/mlflow.db). wandb and mlflow need pip install 'harnessrl[tracking]'; "
        "their own environment variables (WANDB_MODE, WANDB_API_KEY, MLFLOW_TRACKING_URI, ...) apply.",
    )
    tracker_project: str | None = Field(
        None,
        description="W&B project / MLflow experiment; None: WANDB_PROJECT / MLFLOW_EXPERIMENT_NAME, else "
        "'harnessrl'. Runs are named after the harnessrl run id.",
    )
