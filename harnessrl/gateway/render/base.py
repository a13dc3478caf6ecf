"""The contract between the gateway and a token-exact chat renderer.

In ``gateway`` render mode the gateway never lets the engine apply a chat template: it asks a
:class:`ChatRenderer` for the prompt token IDs, sends those to the engine, and asks the renderer to turn the
sampled token IDs back into an OpenAI assistant message. The renderer remembers every call of a rollout so
that the next prompt reuses, token for token, what the policy actually saw and sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from harnessrl.types import Call, Fidelity


class RenderError(ValueError):
    """The request cannot be rendered (malformed messages, unsupported content). The gateway answers 400."""


class UnsupportedContent(RenderError):
    """A message holds content the text renderer cannot represent (images, audio, files)."""


@dataclass(slots=True)
class RenderedPrompt:
    """The prompt the engine must be given, and how it relates to the rollout's earlier calls.

    ``reused_tokens`` leading tokens come from an earlier call (its prompt, its sampled completion and, when
    the engine stopped before emitting them, the template's end-of-turn tokens appended as context:
    ``end_of_turn_appended`` counts those). The rest was tokenized from the template's rendering.
    ``parent`` names the earlier call whose tokens were reused (its call index when known).
    """

    prompt_token_ids: list[int]
    fidelity: Fidelity
    fidelity_reason: str | None
    stop_token_ids: list[int]
    reused_tokens: int = 0
    end_of_turn_appended: int = 0
    parent: int | None = None
    #: Renderer-private state handed back through ``remember`` (the normalized conversation, chain link).
    state: Any = field(default=None, repr=False, compare=False)


@runtime_checkable
class ChatRenderer(Protocol):
    """Renders chat requests to token IDs and completions back to chat messages, per rollout."""

    def render(self, rollout_id: str, body: dict[str, Any]) -> RenderedPrompt:
        """Prompt token IDs for an OpenAI chat-completions request body. Raises :class:`RenderError`."""
        ...

    def parse(
        self, rollout_id: str, completion_token_ids: list[int], finish_reason: str
    ) -> tuple[dict[str, Any], str]:
        """The assistant message (``role``, ``content``, ``tool_calls``) and the finish reason to report."""
        ...

    def stream_parse(self, rollout_id: str) -> Any:
        """An incremental parser for one streamed completion (``add(token_ids) -> delta``, ``finish``)."""
        ...

    def remember(
        self,
        rollout_id: str,
        body: dict[str, Any],
        rendered: RenderedPrompt,
        completion_token_ids: list[int],
        message: dict[str, Any],
    ) -> None:
        """Record a finished call so later prompts of the rollout can reuse its exact tokens."""
        ...

    def load(self, rollout_id: str, calls: list[Call]) -> None:
        """Rebuild a rollout's history from stored calls (after a gateway restart)."""
        ...
