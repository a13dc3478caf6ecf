"""Token-exact chat rendering for the gateway's ``gateway`` render mode.

The gateway calls a :class:`ChatRenderer`: ``render`` a chat request to prompt token IDs (reusing the
rollout's earlier sampled tokens), ``parse`` the completion back into an assistant message with tool calls,
``remember`` the finished call, ``load`` a rollout's calls after a restart.
"""

from harnessrl.gateway.render.base import ChatRenderer, RenderedPrompt, RenderError, UnsupportedContent
from harnessrl.gateway.render.config import RenderConfig
from harnessrl.gateway.render.factory import create_renderer
from harnessrl.gateway.render.renderer import TemplateRenderer
from harnessrl.gateway.render.templates import (
    BUILTIN_TEMPLATES,
    HERMES_CHATML,
    TemplateNotFound,
    resolve_chat_template,
)
from harnessrl.gateway.render.toolcalls import TOOL_PARSERS, HermesToolCallParser, make_tool_parser

__all__ = [
    "BUILTIN_TEMPLATES",
    "HERMES_CHATML",
    "TOOL_PARSERS",
    "ChatRenderer",
    "HermesToolCallParser",
    "RenderConfig",
    "RenderError",
    "RenderedPrompt",
    "TemplateNotFound",
    "TemplateRenderer",
    "UnsupportedContent",
    "create_renderer",
    "make_tool_parser",
    "resolve_chat_template",
]
