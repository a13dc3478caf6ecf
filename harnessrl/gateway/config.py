"""Gateway configuration: one pydantic model, every field with a laptop-friendly default.

Kept apart from the code that reads it so that the lead's ``HarnessConfig`` can compose it as the
``[gateway]`` section of the run's TOML file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harnessrl.config_base import ConfigSection
from harnessrl.gateway.render.config import RenderConfig
from harnessrl.policies.config import RoutingConfig, ServedPolicy
from harnessrl.redaction.text import DEFAULT_REDACTIONS


class GatewayLimits(ConfigSection):
    """Limits that contain a runaway harness. A call asking for more tokens than allowed is served with the
    lower limit; a used-up budget is a clear 4xx that is also recorded."""

    max_tokens_per_call: int | None = Field(
        None, ge=1, description="Cap on a call's max_tokens; none by default: a call gets what it asks for, "
        "lowered only to the room its context leaves (and to the rollout's budget). With a cap, larger "
        "requests and absent ones are served with the cap (logged at start; requested, granted and why "
        "recorded with each call).")
    max_calls_per_rollout: int = Field(1000, ge=1, description="Call budget of one rollout.")
    max_tokens_per_rollout: int = Field(
        1_000_000,
        ge=1,
        description="Budget of completion tokens one rollout may sample (each call's max_tokens is clamped "
        "to what is left).",
    )
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024, description="Largest request body accepted (413).")
    pause_timeout_s: float = Field(
        600.0, gt=0, description="How long a request waits while the gateway is paused before it gets 503."
    )
    upstream_timeout_s: float = Field(
        600.0, gt=0, description="Longest an engine request may go without a byte of its answer before the "
        "engine's health is probed: an engine that answers is slow, not dead, and keeps the request.")
    max_recall_bytes: int = Field(
        256 * 1024 * 1024, ge=0, description="Bytes of a rollout's recorded calls that its Responses calls may "
        "read back, in all, to rebuild a previous_response_id no longer kept in memory; past it such a call is "
        "refused (400 recall_budget).")




class GatewayConfig(ConfigSection):
    """The recording gateway: where it listens, which engines it forwards to, and how it records."""

    mode: Literal["training", "production"] = Field(
        "training", description="'training': rollouts under /r/{rollout}/v1 for runs; 'production': also "
        "deployed applications under /p/{deployment}/v1 with app keys and sessions ([production], "
        "docs/production.md).")
    host: str = Field("127.0.0.1", description="Interface to listen on (loopback by default).")
    port: int = Field(8400, ge=0, le=65535, description="TCP port; 0 picks a free one.")
    public_url: str | None = Field(
        None,
        description="URL harnesses use to reach the gateway (for base_url in POST /admin/rollouts); "
        "defaults to the URL the admin request came in on.",
    )
    engines: list[str] = Field(
        default_factory=list,
        description="Engine base URLs speaking vLLM's OpenAI dialect (e.g. http://127.0.0.1:8000/v1), "
        "or 'embedded'.",
    )
    model_name: str = Field("policy", description="Name under which /v1/models lists the served policy.")
    engine_model: str | None = Field(
        None, description="Model name sent to the engines; default: the first name the engine lists."
    )
    admin_token: str | None = Field(
        None,
        description="Bearer token of the admin API. Else HARNESSRL_ADMIN_TOKEN, else generated at start.",
    )
    viewer_token: str | None = Field(
        None,
        description="Token that opens only the dashboard at /ui (read-only; token IDs on request), never "
        "the admin API. Else HARNESSRL_VIEWER_TOKEN, else none.",
    )
    render_mode: Literal["engine", "gateway"] = Field(
        "engine",
        description="'engine': the engine applies the chat template and returns token ids. 'gateway': "
        "the gateway renders token-exact prompts itself and sends token ids to /completions.",
    )
    render: RenderConfig = Field(default_factory=RenderConfig,
                                 description="Tokenizer/template settings of render_mode 'gateway'.")
    limits: GatewayLimits = Field(default_factory=GatewayLimits)
    pinned_sampling: dict[str, Any] = Field(
        default_factory=dict,
        description="Sampling parameters forced on every call for training (e.g. {temperature = 1.0, "
        "top_p = 1.0}); the harness's own values are overridden and the effective ones recorded.",
    )
    redact_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REDACTIONS),
        description="Regexes whose matches are replaced by [REDACTED] in stored requests and responses.",
    )
    health_interval_s: float = Field(2.0, gt=0, description="Seconds between engine health checks.")
    affinity_slack: int = Field(
        4,
        ge=0,
        description="A rollout stays on its engine (prefix cache) unless that engine has this many more "
        "outstanding requests than the least loaded one.",
    )
    images: Literal["refuse", "pass"] = Field(
        "refuse", description="What the served model reads. 'refuse' (text only: the packaged and embedded "
        "models): an image or other media on any API is refused with the same 400 unsupported_content. 'pass' "
        "(a vision-language model on vLLM): the images of user turns reach the engine as chat image_url parts "
        "on every API (Anthropic image blocks, Responses input_image, Gemini inlineData/fileData), recorded as "
        "sent; such calls are not trained (the trainer reads token IDs, not pixels); other media is refused.")
    record_inline: bool | Literal["auto"] = Field(
        "auto",
        description="Where the calls of one event-loop turn are committed (one transaction). \"auto\": on the "
        "loop when the store can without waiting (SQLite, its lock free, no fsync in the commit) and no call has "
        "a secret to redact, else by a "
        "writer thread; true: always on the loop (a slow disk then stalls every call); false: always the "
        "writer thread (two thread hand-offs a call, ~15% of its CPU at concurrency 1).",
    )
    record_batch_max: int = Field(256, ge=1, description="Most calls committed in one store transaction.")
    policies: dict[str, ServedPolicy] = Field(
        default_factory=dict, description="Several policies (docs/policies.md): each call is routed to one by "
        "`routing` and recorded with its name (sampling.policy) and that policy's version. Empty: one policy.")
    routing: RoutingConfig = Field(default_factory=RoutingConfig, description="How calls find their policy.")

    @model_validator(mode="after")
    def _images_need_a_model_that_reads_them(self) -> GatewayConfig:
        """The embedded engine serves text-only models: passing images to it would drop them silently."""
        if self.images == "pass" and "embedded" in self.engines:
            raise ValueError('[gateway] images = "pass" needs an engine that serves a vision-language model '
                             '(vLLM); the embedded engine reads text only: leave images = "refuse"')
        return self
