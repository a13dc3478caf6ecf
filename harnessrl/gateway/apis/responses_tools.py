"""The Responses API's tools as chat function tools: top-level ``tools`` and ``additional_tools`` input items.

Function tools pass as they are; free-form ``custom`` tools become functions of one string argument
``input``; tool groups (``namespace``) are flattened into ``<group>__<tool>``, and ``Translation.names``
maps each flat name back to the harness's own name, group and kind for the answer.

Top-level hosted tools the policy cannot run (``web_search``, ``file_search``, ``code_interpreter``, ...)
are left out and noted (``dropped_tools``), as before. Codex (0.163 and later) declares its tools in an
input item instead, ``{"type": "additional_tools", "role": "developer", "tools": [...]}``: served the same
way, but a tool there of a kind the policy cannot be offered is refused (400, naming the kind and where),
never dropped: a harness that counts on such a tool would otherwise train without it unawares.
"""

from __future__ import annotations

from typing import Any

from harnessrl.gateway.apis.base import (
    ToolName,
    Translation,
    expect_dict,
    expect_list,
    expect_str,
    flat_name,
    json_schema,
)
from harnessrl.gateway.apis.base import kind as _kind
from harnessrl.gateway.errors import BadRequest

#: The one argument of a free-form ``custom`` tool, as a function.
CUSTOM_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
#: The tool kinds the policy is offered (a namespace's members: the first two).
SERVED = ("function", "custom", "namespace")


def _unserved(kind: str | None, where: str) -> BadRequest:
    return BadRequest(f"{where}: tool type {kind!r} cannot be served to the policy (served: function, custom, and "
                      "namespace groups of them); leave it out of the request", code="unsupported_tool")


def chat_tools(tools: list[Any], t: Translation, where: str, strict: bool) -> list[dict[str, Any]]:
    """``tools`` (at ``where``: ``tools`` or ``input[i].tools``) as chat function tools, their names mapped
    in ``t.names``. ``strict``: a kind that cannot be served is refused, not dropped and noted."""
    out: list[dict[str, Any]] = []

    def add(tool: dict[str, Any], here: str, namespace: str | None) -> None:
        kind = _kind(tool, "function")
        name = expect_str(tool.get("name"), f"{here}.name")
        desc = tool.get("description") or ""
        if kind == "function":
            params = json_schema(tool.get("parameters"), f"{here}.parameters")
        elif kind == "custom":  # free-form input (e.g. a patch in a grammar): one string argument
            params = CUSTOM_SCHEMA
            fmt = tool.get("format")
            if isinstance(fmt, dict) and isinstance(fmt.get("definition"), str):
                desc = f"{desc}\n\nThe `input` argument follows this {fmt.get('syntax', '')} grammar:\n" \
                       f"{fmt['definition']}"
        elif strict:
            raise _unserved(kind, here)
        else:
            t.note("dropped_tools", f"{namespace}.{name}" if namespace else name)
            return
        flat = flat_name(namespace, name) if namespace else name
        t.names[flat] = ToolName(name=name, namespace=namespace, kind=kind)
        out.append({"type": "function", "function": {
            "name": flat, "description": expect_str(desc, f"{here}.description"), "parameters": params}})

    for k, tool in enumerate(expect_list(tools, where)):
        here = f"{where}[{k}]"
        tool = expect_dict(tool, here)
        kind = _kind(tool, "function")
        if kind in ("function", "custom"):
            add(tool, here, None)
        elif kind == "namespace":
            ns = expect_str(tool.get("name"), f"{here}.name")
            for j, sub in enumerate(expect_list(tool.get("tools") or [], f"{here}.tools")):
                add(expect_dict(sub, f"{here}.tools[{j}]"), f"{here}.tools[{j}]", ns)
            t.note("flattened_groups", ns)
        elif strict:
            raise _unserved(kind, here)
        else:  # hosted tools: web_search, file_search, code_interpreter, computer_use, mcp, local_shell, ...
            t.note("dropped_tools", str(kind))
    return out


def merge(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One tool list from several declarations (top-level, then each ``additional_tools`` item in order): a
    tool declared twice alike is offered once; one name declared twice differently is refused."""
    seen: dict[str, dict[str, Any]] = {}
    for group in groups:
        for tool in group:
            name = tool["function"]["name"]
            if name in seen and seen[name] != tool:
                raise BadRequest(f"tool {name!r} is declared twice with different definitions (top-level tools "
                                 "and additional_tools items)", code="duplicate_tool")
            seen.setdefault(name, tool)
    return list(seen.values())
