"""Parsing sampled text back into OpenAI tool calls, per model family.

Formats: Hermes JSON in ``<tool_call>`` (Hermes, Qwen2.5, Qwen3), the Qwen3-Coder XML form
(``<function=...><parameter=...>``, also Qwen3.5), and Llama 3.x JSON (``{"name": ..., "parameters": ...}``).
The parser must agree with the chat template that rendered the tools (what the model was shown is what it
imitates). A small registry maps a name to a parser; ``auto`` picks by looking at the template. A parser
never raises: text it cannot read as tool calls is returned as plain assistant content, so a malformed
call reaches the harness as text (which it can show to the model) instead of a 500.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ParsedToolCall:
    name: str
    arguments: str  # a JSON string, as the OpenAI API returns it


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    content: str | None
    tool_calls: list[ParsedToolCall] = field(default_factory=list)


class ToolCallParser(Protocol):
    #: Text that starts a tool call (a streamed answer holds back everything from it on), or None.
    start_marker: str | None

    def parse(self, text: str) -> ParsedCompletion: ...


class NoToolCallParser:
    """For models without a tool-call convention: everything is content."""

    start_marker = None

    def parse(self, text: str) -> ParsedCompletion:
        return ParsedCompletion(content=text)


class HermesToolCallParser:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes, Qwen2.5/3, SmolLM2 with
    the ``hermes-chatml`` template). A final block left unclosed (the engine stopped right after the JSON)
    is accepted when its JSON is complete. If any block is not valid JSON naming a function, the whole
    completion is returned as text: a partial reading would hide the model's mistake from the harness."""

    start_marker = "<tool_call>"
    _block = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)

    def parse(self, text: str) -> ParsedCompletion:
        if "<tool_call>" not in text:
            return ParsedCompletion(content=text)
        calls: list[ParsedToolCall] = []
        for match in self._block.finditer(text):
            block = self._parse_block(match.group(1))
            if block is None:
                return ParsedCompletion(content=text)
            calls.extend(block)
        content = self._block.sub("", text).strip()
        return ParsedCompletion(content=content or None, tool_calls=calls)

    @classmethod
    def _parse_block(cls, raw: str) -> list[ParsedToolCall] | None:
        """One call object, or a JSON list of them (SmolLM2-1.7B's own format)."""
        try:
            obj = json.loads(raw)
        except ValueError:
            return None
        objs = obj if isinstance(obj, list) and obj else [obj]
        calls = []
        for item in objs:
            call = cls._call(item)
            if call is None:
                return None
            calls.append(call)
        return calls

    @staticmethod
    def _call(obj: object) -> ParsedToolCall | None:
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
            return None
        arguments = obj.get("arguments", obj.get("parameters", {}))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return ParsedToolCall(name=obj["name"], arguments=arguments)


class Qwen3CoderToolCallParser:
    """The XML form of Qwen3-Coder (and Qwen3.5): ``<tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n
    </parameter>\n</function>\n</tool_call>``. A value that reads as JSON other than a string (a number, an
    object, ``true``) becomes that value, else it stays text -- the template writes strings bare and other
    values as JSON, so this is its inverse. Anything malformed: the whole completion is text."""

    start_marker = "<tool_call>"
    _block = re.compile(r"<tool_call>\s*<function=([^>\n]+)>(.*?)</function>\s*(?:</tool_call>|\Z)", re.S)
    _param = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)

    def parse(self, text: str) -> ParsedCompletion:
        if "<tool_call>" not in text:
            return ParsedCompletion(content=text)
        calls = []
        for match in self._block.finditer(text):
            arguments = {}
            for p in self._param.finditer(match.group(2)):
                arguments[p.group(1).strip()] = self._value(p.group(2))
            calls.append(ParsedToolCall(name=match.group(1).strip(),
                                        arguments=json.dumps(arguments, ensure_ascii=False)))
        rest = self._block.sub("", text)
        if not calls or "<tool_call>" in rest:
            return ParsedCompletion(content=text)
        content = rest.strip()
        return ParsedCompletion(content=content or None, tool_calls=calls)

    @staticmethod
    def _value(raw: str) -> object:
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        return raw if isinstance(value, str) else value


class Llama3JsonToolCallParser:
    """Llama 3.1-3.3 JSON tool calls: the whole answer is ``{"name": ..., "parameters": {...}}`` (optionally
    after ``<|python_tag|>``; several separated by ``;``). Anything else is text."""

    start_marker = '{"name"'

    def parse(self, text: str) -> ParsedCompletion:
        body = text.strip()
        if body.startswith("<|python_tag|>"):
            body = body[len("<|python_tag|>"):].strip()
        if not body.startswith("{"):
            return ParsedCompletion(content=text)
        calls = []
        for part in body.split(";"):
            try:
                obj = json.loads(part)
            except ValueError:
                return ParsedCompletion(content=text)
            call = HermesToolCallParser._call(obj)
            if call is None:
                return ParsedCompletion(content=text)
            calls.append(call)
        return ParsedCompletion(content=None, tool_calls=calls)


#: Tool-call parsers by name, selectable in ``RenderConfig.tool_parser``.
TOOL_PARSERS: dict[str, type[ToolCallParser]] = {
    "hermes": HermesToolCallParser,
    "qwen3_coder": Qwen3CoderToolCallParser,
    "llama3_json": Llama3JsonToolCallParser,
    "none": NoToolCallParser,
}


class UnknownToolParser(ValueError):
    """``tool_parser`` names no registered parser."""


def make_tool_parser(choice: str, template: str) -> tuple[str, ToolCallParser]:
    """``(name, parser)``; ``auto`` reads the chat template: ``<function=`` means the Qwen3-Coder XML form,
    ``<tool_call>`` Hermes JSON, ``"parameters": `` with an ``ipython`` role Llama 3 JSON."""
    if choice == "auto":
        if "<function=" in template:
            choice = "qwen3_coder"
        elif "<tool_call>" in template:
            choice = "hermes"
        elif '"parameters": ' in template and "ipython" in template:
            choice = "llama3_json"
        else:
            choice = "none"
    if choice not in TOOL_PARSERS:
        raise UnknownToolParser(f"tool_parser {choice!r} is not one of {sorted(TOOL_PARSERS)} or 'auto'")
    return choice, TOOL_PARSERS[choice]()
