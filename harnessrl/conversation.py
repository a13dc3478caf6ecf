"""A call's request and response as readable turns, whatever API the harness used.

Chat Completions, Anthropic Messages, Responses, Gemini and Completions bodies differ in shape; the page shows
each as a list of ``(role, text)`` turns plus the raw JSON. Text is untrusted: templates escape it.
Below both of its readers: the dashboard and terminal (``inspection/``) and the judge's transcript
(``rewards/judge_transcript.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        kind = part.get("type")
        if isinstance(part.get("text"), str) and kind in (None, "text", "input_text", "output_text"):
            return str(part["text"])
        return json.dumps(part, ensure_ascii=False, indent=1)
    return json.dumps(part, ensure_ascii=False)


def _content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content)
    return _part_text(content)


def _message_turn(m: Any) -> Turn:
    if not isinstance(m, dict):
        return Turn("?", _part_text(m))
    role = str(m.get("role") or m.get("type") or "?")
    text = _content(m.get("content", m.get("output", m.get("text"))))
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        text += f"\n→ tool call {fn.get('name', '?')}({fn.get('arguments', '')})"
    if m.get("type") == "function_call":
        text = f"→ tool call {m.get('name', '?')}({m.get('arguments', '')})"
    if m.get("tool_call_id"):
        role += f" [{m['tool_call_id']}]"
    return Turn(role, text.strip("\n"))


def _gemini_turn(content: Any) -> Turn:
    """A Gemini ``Content`` ({role, parts}): text, function calls and function responses in order."""
    if not isinstance(content, dict):
        return Turn("?", _part_text(content))
    texts = []
    for part in content.get("parts") or []:
        if not isinstance(part, dict):
            texts.append(_part_text(part))
        elif isinstance(part.get("text"), str):
            texts.append(("(thought) " if part.get("thought") else "") + part["text"])
        elif isinstance(part.get("functionCall"), dict):
            fc = part["functionCall"]
            texts.append(f"→ tool call {fc.get('name', '?')}({json.dumps(fc.get('args', {}), ensure_ascii=False)})")
        elif isinstance(part.get("functionResponse"), dict):
            fr = part["functionResponse"]
            texts.append(f"← {fr.get('name', '?')}: {json.dumps(fr.get('response'), ensure_ascii=False)}")
        else:
            texts.append(_part_text(part))
    return Turn(str(content.get("role") or "user"), "\n".join(texts))


def request_turns(request: dict[str, Any]) -> list[Turn]:
    """The conversation the harness sent (redacted as stored)."""
    turns: list[Turn] = []
    if request.get("system") is not None:  # Anthropic
        turns.append(Turn("system", _content(request["system"])))
    if isinstance(request.get("instructions"), str):  # Responses
        turns.append(Turn("instructions", request["instructions"]))
    if isinstance(request.get("messages"), list):
        turns += [_message_turn(m) for m in request["messages"]]
    if "input" in request:
        items = request["input"]
        turns += [Turn("user", items)] if isinstance(items, str) else [_message_turn(m) for m in items or []]
    system = request.get("systemInstruction", request.get("system_instruction"))
    if system is not None:  # Gemini
        turns.append(Turn("system", system if isinstance(system, str) else _gemini_turn(system).text))
    if isinstance(request.get("contents"), list):
        turns += [_gemini_turn(c) for c in request["contents"]]
    if "prompt" in request:
        prompt = request["prompt"]
        turns.append(Turn("prompt", prompt if isinstance(prompt, str) else json.dumps(prompt)))
    return turns


def response_turns(response: dict[str, Any] | None) -> list[Turn]:
    """The answer(s) the harness received: one turn per choice / output item."""
    if not response:
        return []
    turns: list[Turn] = []
    for i, ch in enumerate(response.get("choices") or []):
        if not isinstance(ch, dict):
            continue
        label = f"choice {i}" + (f" ({ch['finish_reason']})" if ch.get("finish_reason") else "")
        if isinstance(ch.get("message"), dict):
            turns.append(Turn(label, _message_turn(ch["message"]).text))
        else:
            turns.append(Turn(label, str(ch.get("text", ""))))
    if response.get("type") == "message" and isinstance(response.get("content"), list):  # Anthropic
        turns.append(Turn(f"assistant ({response.get('stop_reason', '')})", _content(response["content"])))
    for item in response.get("output") or []:  # Responses
        turns.append(_message_turn(item))
    for cand in response.get("candidates") or []:  # Gemini
        if isinstance(cand, dict):
            turns.append(Turn(f"model ({cand.get('finishReason', '')})", _gemini_turn(cand.get("content") or {}).text))
    return turns


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)
