"""Token-exact chat rendering for the gateway's ``gateway`` render mode.

The gateway calls a :class:`ChatRenderer`: ``render`` a chat request to prompt token IDs (reusing the
rollout's earlier sampled tokens), ``parse`` the completion back into an assistant message with tool calls,
``remember`` the finished call, ``load`` a rollout's calls after a restart (and ``forget`` a finished rollout).

Fidelity of a rendered prompt, relative to the earlier call ``P`` it reuses (``parent``):

- ``exact``: ``prompt == P.prompt + P.completion``, nothing added. Happens when the harness asks the model to
  continue its own last answer (the conversation ends with ``P``'s assistant message, e.g. after
  ``finish_reason: length``).
- ``extended``: ``prompt == P.prompt + P.completion + eot + suffix``: ``eot`` is the template's end-of-turn
  tokens the engine did not sample (for ChatML the ``\n`` after ``<|im_end|>``, or ``<|im_end|>\n`` when the
  engine stopped without it, which the reason then records); ``suffix`` is the template's text after the
  assistant turn (tool results, user turns, generation prompt), tokenized fresh. The usual case. Also when
  the template renders the reused assistant turns differently once later turns exist (Qwen3 drops earlier
  thinking): the sampled tokens are kept, never re-rendered, and the reason says so.
- ``rerendered``: the whole prompt tokenized from the template, with the reason: first call of the chain;
  no earlier conversation is a prefix (summarized, truncated, edited history); tool definitions changed;
  or the template renders earlier turns differently once later turns exist, beyond the assistant turns.

Matching is by message (role, text, tool calls by name and parsed arguments, tool_call_id), never by
re-tokenizing, and each request picks the longest matching call among *all* the rollout's calls, so
retries, summaries and sub-agents each extend their own chain.
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
from harnessrl.gateway.render.toolcalls import (
    TOOL_PARSERS,
    HermesToolCallParser,
    Llama3JsonToolCallParser,
    Qwen3CoderToolCallParser,
    make_tool_parser,
)

__all__ = [
    "BUILTIN_TEMPLATES",
    "HERMES_CHATML",
    "TOOL_PARSERS",
    "ChatRenderer",
    "HermesToolCallParser",
    "Llama3JsonToolCallParser",
    "Qwen3CoderToolCallParser",
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
