"""The seam between the gateway and token-exact rendering (``render_mode = "gateway"``).

The gateway does not know chat templates. In gateway render mode it hands each chat request to a
``ChatRenderer`` (the protocol and ``RenderedPrompt`` are defined once, in ``gateway/render/base.py``),
sends the returned token ids to the engine's ``/completions``, and asks the renderer to parse the sampled
tokens back into a message. This module only loads one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from harnessrl.gateway.config import GatewayConfig

if TYPE_CHECKING:  # the render package stays optional at import
    from harnessrl.gateway.render.base import ChatRenderer

log = logging.getLogger(__name__)


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
