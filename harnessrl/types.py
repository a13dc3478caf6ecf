"""The vocabulary of harnessrl, defined once.

Read this file to learn the words; every other module, the config, the CLI and the dashboard use them
with exactly these meanings.

- **run**: one training (or collection) job: a config, a task set, a sequence of steps and policy versions.
- **task**: one problem the harness is asked to solve (an input dict, optionally a workspace and a
  verifier). Tasks belong to a split: ``train`` or ``eval`` (held out, never trained on).
- **rollout** (also *attempt*): one run of the unmodified harness on one task. It owns a base URL and a
  scoped API key; every model call made with that key belongs to it. Its ``status`` moves through a state
  machine that the store enforces (see ``ROLLOUT_TRANSITIONS``).
- **group**: the ``n`` rollouts of the same task launched in the same step. Advantages are computed
  within a group (GRPO/RLOO).
- **call**: one model request made by the harness through the gateway, with the exact prompt and
  completion token IDs that the engine used and sampled, the completion logprobs, and the policy version
  that served it.
- **reward**: a scalar attached to a rollout (optionally to one of its calls via ``call_index``); several
  named rewards may be attached to one rollout.
- **policy version**: a monotonically increasing integer naming the weights the engine serves. Version 0
  is the initial model; each published update increments it.
- **sample**: one training sequence built from one or more calls of a rollout (calls whose prompt extends
  the previous sequence are merged into it; otherwise a new sample starts).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class RolloutStatus(enum.StrEnum):
    """Lifecycle of a rollout. Terminal states never change again."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.TIMED_OUT, RolloutStatus.CANCELLED}
)

#: Legal moves of the rollout state machine. Anything else is refused by the store.
ROLLOUT_TRANSITIONS: dict[RolloutStatus, frozenset[RolloutStatus]] = {
    RolloutStatus.QUEUED: frozenset({RolloutStatus.RUNNING, RolloutStatus.FAILED, RolloutStatus.CANCELLED}),
    RolloutStatus.RUNNING: frozenset(
        {RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.TIMED_OUT, RolloutStatus.CANCELLED}
    ),
    RolloutStatus.SUCCEEDED: frozenset(),
    RolloutStatus.FAILED: frozenset(),
    RolloutStatus.TIMED_OUT: frozenset(),
    RolloutStatus.CANCELLED: frozenset(),
}


#: The reason of an attempt stopped because its controller stopped (Ctrl-C, a kill found at the next start):
#: infra, and no fault of the task, so ``harnessrl eval`` reruns it without counting it against the retry bound.
INTERRUPTED = "controller interrupted while this attempt was in flight"

class FailureKind(enum.StrEnum):
    """Why a rollout did not succeed.

    ``agent`` failures (wrong answer, harness gave up, harness-caused timeout) keep their reward and are
    trained on. ``infra`` failures (runner crash, engine down, system timeout) are excluded from their group
    and never become a reward of 0.
    """

    AGENT = "agent"
    INFRA = "infra"


class CallStatus(enum.StrEnum):
    """Outcome of one model call as seen by the gateway.

    ``refused``: answered with an error before the engine was asked (a request the API's rules refuse, an
    unreadable body, a used-up budget, an unknown route under the rollout's URL): nothing was sampled, and the
    record says why, so a harness that fails can be understood from the rollout alone. ``error``: serving
    failed after the engine was asked (the engine refused or died).
    """

    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"
    REFUSED = "refused"


class ApiKind(enum.StrEnum):
    """Which client-facing API the harness used for a call."""

    CHAT = "chat.completions"
    COMPLETIONS = "completions"
    RESPONSES = "responses"
    ANTHROPIC_MESSAGES = "anthropic.messages"
    GEMINI = "gemini.generate_content"  # Google's generateContent and streamGenerateContent


class Fidelity(enum.StrEnum):
    """How a call's prompt tokens relate to the rollout's earlier calls (recorded per call).

    ``exact``: the prompt is an earlier call's prompt+completion, token for token.
    ``extended``: an earlier prompt+completion is reused token for token, plus newly tokenized suffix.
    ``rerendered``: no earlier call is a prefix (first call of a chain, or the harness edited history).
    """

    EXACT = "exact"
    EXTENDED = "extended"
    RERENDERED = "rerendered"


class SampleFidelity(enum.StrEnum):
    """How a training sample was assembled from calls.

    ``exact``: one call, nothing merged. ``merged``: several calls whose prompts extended the previous
    sequence, joined without retokenizing. ``split``: this sample starts where the previous call's tokens
    were not a prefix of the next prompt (the reason says why). ``retokenized``: its tokens are not what an
    engine sampled but a tokenizer's rendering of text (an imported conversation, a teacher's trace); the
    reason says whose template, and behaviour logprobs are unknown (0.0), so only SFT trains it.
    """

    EXACT = "exact"
    MERGED = "merged"
    SPLIT = "split"
    RETOKENIZED = "retokenized"


class ChainStart(enum.StrEnum):
    """Why a sample (a *chain*: calls whose prompts extend one another) starts where it does.

    ``first``: the rollout's first chain. ``compaction``: the harness replaced its history by a summary (the
    sample names the call that wrote it); ``summary``: a chain opened by that summary request itself.
    ``sub_agent``: a separate conversation run while another chain goes on (a sub-agent, or a side call).
    ``prefix_break``: any other break (history edited or re-rendered, tools changed). ``choice``: an extra
    choice of an ``n > 1`` call. Labels come from the tokens alone (``training/chains.py`` says how); every
    chain is trained with its rollout's advantage whatever its label.
    """

    FIRST = "first"
    COMPACTION = "compaction"
    SUMMARY = "summary"
    SUB_AGENT = "sub_agent"
    PREFIX_BREAK = "prefix_break"
    CHOICE = "choice"


class TaskSplit(enum.StrEnum):
    TRAIN = "train"
    EVAL = "eval"


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    name: str
    config: dict[str, Any]
    created_at: float
    #: When the run said it is done (``harnessrl train``/``collect`` returned); None while it may go on.
    #: Retention keeps every call of a run that has not ended, whatever its age.
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class Task:
    run_id: str
    id: str
    input: dict[str, Any]
    split: TaskSplit = TaskSplit.TRAIN


@dataclass(frozen=True, slots=True)
class Rollout:
    """One attempt of one task. ``api_key`` is only ever returned at creation; the store keeps a hash."""

    id: str
    run_id: str | None
    task_id: str
    group_id: str
    input: dict[str, Any]
    status: RolloutStatus
    policy_version: int
    step: int | None = None
    failure_kind: FailureKind | None = None
    error: str | None = None
    exit_code: int | None = None
    logs: str | None = None
    runner_handle: str | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: When retention deleted its calls' text and token arrays and its logs (``harnessrl purge``).
    purged_at: float | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One model request, with the tokens the engine actually saw and sampled.

    ``choices`` holds one entry per returned choice (``n > 1``); ``completion_token_ids`` /
    ``completion_logprobs`` are those of choice 0 for convenience. ``prompt_token_ids`` is always the full
    prompt, however the store compresses it.
    """

    rollout_id: str
    index: int
    api: ApiKind
    status: CallStatus
    request: dict[str, Any]
    response: dict[str, Any] | None
    prompt_token_ids: list[int]
    choices: list[ChoiceTokens]
    policy_version: int
    requested_model: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    engine_id: str | None = None
    latency_s: float | None = None
    error: str | None = None
    fidelity: Fidelity | None = None
    fidelity_reason: str | None = None
    created_at: float = 0.0
    #: Set when retention deleted this call's request, response and token arrays: they read as empty
    #: (``choices`` keep only their finish reasons) and every reader says "purged" instead.
    purged_at: float | None = None

    @property
    def completion_token_ids(self) -> list[int]:
        return self.choices[0].token_ids if self.choices else []

    @property
    def completion_logprobs(self) -> list[float]:
        return self.choices[0].logprobs if self.choices else []


@dataclass(frozen=True, slots=True)
class ChoiceTokens:
    """The sampled tokens of one choice and the logprob of each under the sampling distribution."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None = None


#: The reward scoring writes once per attempt: the configured combination of its sources (verifier, exit
#: code, what the harness posted). Training, evaluation and the dashboard read this one when it exists.
FINAL_REWARD = "final"


@dataclass(frozen=True, slots=True)
class Reward:
    """A named value for a rollout (outcome) or for one of its calls (``call_index`` set)."""

    rollout_id: str
    value: float
    name: str = "reward"
    call_index: int | None = None
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    run_id: str | None
    version: int
    checkpoint_path: str | None
    created_at: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sample:
    """One training sequence of a rollout.

    ``loss_mask[i]`` is 1 where token ``i`` was sampled by the policy (trained on) and 0 for context.
    ``behaviour_logprobs[i]`` is the engine's logprob for sampled tokens (0.0 where the mask is 0).
    """

    rollout_id: str
    group_id: str
    token_ids: list[int]
    loss_mask: list[int]
    behaviour_logprobs: list[float]
    policy_versions: list[int]
    call_indices: list[int]
    fidelity: SampleFidelity
    fidelity_reason: str | None = None
    advantage: float = 0.0
    #: (start, end) of each call's sampled completion in ``token_ids``, parallel to ``call_indices``.
    call_spans: list[tuple[int, int]] = field(default_factory=list)
    #: Per-token advantages (per-call rewards with a discount); ``None`` broadcasts ``advantage``.
    token_advantages: list[float] | None = None
    #: Sampling temperature of each token's call (aligned with ``token_ids``; None: all 1.0). The
    #: trainer scores tokens under the same tempered distribution the engine sampled them from, or the
    #: PPO ratio would start away from 1.
    temperatures: list[float] | None = None
    #: Tokens of this sample that stand in for a secret (the gateway replaced them when recording): context
    #: as the model did not see it, and never trained (loss mask 0). 0: nothing was redacted.
    redacted: int = 0
    #: Which chain of its rollout this sample is (0, 1, ... in the order of each chain's first call; a number
    #: skipped is a chain left out, e.g. ``overflow = "drop"``), why it starts, the chain it came from
    #: (compaction: the one summarised; sub-agent: its parent; None for the first) and, for a compaction, the
    #: call whose completion is the summary this chain's prompt carries.
    chain: int = 0
    chain_start: ChainStart = ChainStart.FIRST
    parent_chain: int | None = None
    summary_call: int | None = None
