'''Chat templates: which one renders a model's conversations in gateway mode.

SmolLM2's own template ignores ``tools`` and has no tool role (a tool result would be rendered as an
unknown ``<|im_start|>tool`` turn and assistant tool calls would vanish). For ChatML models whose template
does not handle tools we use ``hermes-chatml``: the same ChatML turns and default system prompt, plus the
Hermes/Qwen2.5 tool convention, which is also what our tool-call parser reads back:

- tool definitions are listed in the system turn inside ``<tools></tools>``, one JSON object per line;
- an assistant tool call is ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
- consecutive tool results are grouped into one ``user`` turn, each inside ``<tool_response></tool_response>``
  (Qwen2.5 style: the model knows the user role, not a tool role).
'''

from __future__ import annotations

from pathlib import Path
from typing import Any

HERMES_CHATML = (
    "{%- set default_system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set system_text = messages[0].content %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system_text = default_system %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system_text }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call>' }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message.role == 'tool' %}"
    "{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for tc in (message.tool_calls or []) %}"
    "{%- set f = tc.function if tc.function is defined else tc %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": ' + (f.name | tojson) + ', \"arguments\": ' }}"
    "{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: Templates shipped with harnessrl, selectable by name in ``RenderConfig.chat_template``.
BUILTIN_TEMPLATES: dict[str, str] = {"hermes-chatml": HERMES_CHATML}


class TemplateNotFound(ValueError):
    """No usable chat template: the tokenizer has none and the config names none."""


def _handles_tools(template: str) -> bool:
    return "tools" in template and ("tool_calls" in template or "tool_call" in template)


def resolve_chat_template(tokenizer: Any, choice: str = "auto") -> tuple[str, str]:
    """``(name, template)`` for ``choice``: ``auto`` (the model's template unless it is a ChatML template
    that ignores tools, then ``hermes-chatml``), ``model`` (the tokenizer's own), a builtin name, a path to
    a ``.jinja`` file, or a literal Jinja template."""
    own = getattr(tokenizer, "chat_template", None)
    if isinstance(own, dict):  # several named templates: the default one renders chats
        own = own.get("default")
    if choice == "auto":
        if own and _handles_tools(own):
            return "model", own
        if (own and "<|im_start|>" in own) or (not own and "<|im_start|>" in tokenizer.get_vocab()):
            return "hermes-chatml", HERMES_CHATML
        if own:
            return "model", own
        raise TemplateNotFound("the tokenizer has no chat template; set chat_template to a builtin name or a file")
    if choice == "model":
        if not own:
            raise TemplateNotFound("chat_template = 'model' but the tokenizer has no chat template")
        return "model", own
    if choice in BUILTIN_TEMPLATES:
        return choice, BUILTIN_TEMPLATES[choice]
    if "{%" in choice or "{{" in choice:
        return "custom", choice
    path = Path(choice).expanduser()
    if path.is_file():
        return str(path), path.read_text()
    raise TemplateNotFound(
        f"chat_template {choice!r} is neither 'auto', 'model', a builtin ({sorted(BUILTIN_TEMPLATES)}), "
        "a Jinja template nor an existing file"
    )
