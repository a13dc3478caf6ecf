"""A scripted engine for the production coding CLIs (Claude Code, Codex, OpenCode) through the gateway.

Why not ``ScriptedEngine`` as is: these CLIs send 10-20k-token system prompts and side requests (a
session title, a shell command's prefix) beside the agent's own turns. Here

- the prompt is rendered compactly: a user, system or tool message becomes its role token plus four
  tokens hashed from its text, an assistant message its sampled bytes (tool calls re-serialized from
  parsed arguments, as real chat templates do): a whole CLI session stays a few hundred tokens, a later
  call's prompt still extends the earlier prompt + completion token for token when the harness sends its
  history back unchanged, and the tiny test model can train on the recorded ids (all < 462);
- a request that does not offer the script's tools is a side request: answered with ``side_text``
  (kept in ``side_requests``), never advancing the script;
- ``{cwd}`` in a scripted argument is replaced by ``cwd`` (set by the test to the attempt's workspace:
  Claude Code's Edit wants absolute paths).

The test swaps ``script`` and ``cwd`` between attempts (attempts run one after another).

``CliTokenScriptEngine`` plays the same scripts behind a gateway in render mode ``gateway``: it gets token
ids at ``/v1/completions``, reads them with the tokenizer the gateway renders with (ChatML, Hermes tool
calls: the tiny test model's) and answers with that tokenizer's ids of a ``<tool_call>`` or the text.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .fake_engine import END, ROLES, FakeEngine, _text, tool_call_tokens

HASH_BASE = 262  # after the fake's byte and special tokens; ids stay below 462 (tiny vocabulary: 476)
HASH_TOKENS = 4


def _fill(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace("{cwd}", cwd)
    if isinstance(value, dict):
        return {k: _fill(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, cwd) for v in value]
    return value


def _arguments(raw: Any) -> str:
    """Tool-call arguments as the template renders them: parsed, then compact JSON (order kept)."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return orjson.dumps(raw).decode()


def hashed(text: str) -> list[int]:
    digest = hashlib.blake2b(text.encode(), digest_size=HASH_TOKENS).digest()
    return [HASH_BASE + b % 200 for b in digest]


def render_compact(messages: list[dict]) -> list[int]:
    ids: list[int] = []
    for m in messages:
        role = m.get("role", "user")
        ids.append(ROLES.get(role, 258))
        if role == "assistant":
            ids.extend(_text(m.get("content")).encode())
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                ids.extend(tool_call_tokens(fn.get("name", ""), _arguments(fn.get("arguments", ""))))
        else:
            ids.extend(hashed(_text(m.get("content"))))
        ids.append(END)
    ids.append(ROLES["assistant"])
    return ids


class CliScriptEngine(FakeEngine):
    """``script[k]`` answers the agent's turn ``k`` (assistant messages already in its history):
    ``{"tool": name, "arguments": {...}}`` or ``{"text": "..."}``; turns past the end repeat the last."""

    def __init__(self, script: list[dict[str, Any]], *, cwd: str = "", side_text: str = "none",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = script
        self.cwd = cwd
        self.side_text = side_text
        self.side_requests: list[dict] = []
        self.agent_requests: list[dict] = []

    def render(self, messages: list[dict]) -> list[int]:
        return render_compact(messages)

    def is_side_request(self, body: dict) -> bool:
        offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or () if isinstance(t, dict)}
        wanted = {s["tool"] for s in self.script if "tool" in s}
        return not wanted or not (wanted & offered)

    def step(self, turn: int) -> dict[str, Any]:
        return _fill(self.script[min(turn, len(self.script) - 1)], self.cwd)

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        if self.is_side_request(body):
            self.side_requests.append(body)
            return [*self.side_text.encode(), END], "stop", None
        self.agent_requests.append(body)
        turn = sum(1 for m in body.get("messages") or () if m.get("role") == "assistant")
        step = self.step(turn)
        if "tool" in step:
            args = orjson.dumps(step["arguments"]).decode()
            call = {"id": f"call_{turn}_{index}", "type": "function",
                    "function": {"name": step["tool"], "arguments": args}}
            return [*tool_call_tokens(step["tool"], args), END], "tool_calls", call
        return [*str(step["text"]).encode(), END], "stop", None


class CliTokenScriptEngine(CliScriptEngine):
    """The script for render mode ``gateway``: token ids in and out, through ``tokenizer`` (ChatML)."""

    def __init__(self, script: list[dict[str, Any]], tokenizer: Any, **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.tokenizer = tokenizer
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _encode(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.end]

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        text = self.tokenizer.decode(prompt)
        wanted = {s["tool"] for s in self.script if "tool" in s}
        if not any(f'"name": "{name}"' in text for name in wanted):  # the tool list is in the system turn
            self.side_requests.append(body)
            return self._encode(self.side_text), "stop", None
        self.agent_requests.append(body)
        step = self.step(text.count("<|im_start|>assistant") - 1)  # minus the generation prompt
        if "tool" in step:
            call = orjson.dumps({"name": step["tool"], "arguments": step["arguments"]}).decode()
            return self._encode(f"<tool_call>{call}</tool_call>"), "stop", None
        return self._encode(str(step["text"])), "stop", None


class CliTextScriptEngine(CliScriptEngine):
    """The script for a harness that offers no tools and edits by the text of its answers (aider): the
    ``k``-th request of an attempt whose system message carries ``marker`` (a phrase of the agent's system
    prompt) gets ``script[k]`` (``{"text": ...}``); any other request (aider's commit message, whose
    context quotes the task too) is a side request. Counted, not read from the history: aider rebuilds its
    context every turn (files' new contents, repository map) and its prompt holds example exchanges."""

    def __init__(self, script: list[dict[str, Any]], marker: str, **kwargs: Any) -> None:
        self.marker = marker
        super().__init__(script, **kwargs)

    @property
    def script(self) -> list[dict[str, Any]]:
        return self._script

    @script.setter
    def script(self, script: list[dict[str, Any]]) -> None:
        self._script, self.turn = script, 0  # a new attempt starts at turn 0

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        if not any(self.marker in _text(m.get("content")) for m in body.get("messages") or ()
                   if m.get("role") == "system"):
            self.side_requests.append(body)
            return [*self.side_text.encode(), END], "stop", None
        self.agent_requests.append(body)
        step = self.step(self.turn)
        self.turn += 1
        return [*str(step["text"]).encode(), END], "stop", None
