"""The seam between the gateway and token-exact rendering (``render_mode = "gateway"``).

The gateway does not know chat templates. In gateway render mode it hands each chat request to a
``ChatRenderer`` (implemented in ``harnessrl.gateway.render``), sends the returned token ids to the
engine's ``/completions``, and asks the renderer to parse the sampled tokens back into a message.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from harnessrl.gateway.config import GatewayConfig

log = logging.getLogger(__name__)


class RenderedPrompt(Protocol):
    prompt_token_ids: list[int]
    fidelity: Any  # harnessrl.types.Fidelity
    fidelity_reason: str | None
    stop_token_ids: list[int]


class ChatRenderer(Protocol):
    def render(self, rollout_id: str, body: dict) -> RenderedPrompt:
        """Token ids of the prompt for this chat request, reusing the rollout's earlier tokens."""

    def parse(self, rollout_id: str, completion_token_ids: list[int], finish_reason: str) -> tuple[dict, str]:
        """(assistant message with content/tool_calls, finish_reason) from sampled token ids."""

    def stream_parse(self, rollout_id: str) -> Any:
        """An incremental parser for one streamed completion (``add(token_ids) -> delta``, ``finish``)."""

    def remember(self, rollout_id: str, body: dict, rendered: RenderedPrompt,
                 completion_token_ids: list[int], message: dict) -> None:
        """Keep this turn's exact tokens so that the next prompt can extend them."""


def load_renderer(config: GatewayConfig) -> ChatRenderer | None:
    """The renderer for ``render_mode = "gateway"``, or None when the render package is not available.

    Uses ``harnessrl.gateway.render.create_renderer(config)``, which reads ``config.render`` (tokenizer
    and template). Without the render package chat calls get a 501; a tokenizer that cannot be loaded
    fails the gateway's start (better than serving a mode that cannot work).
    """
    try:
        from harnessrl.gateway.render import create_renderer
    except ImportError as exc:
        log.error("render_mode 'gateway' unavailable: %s", exc)
        return None
    return create_renderer(config)
