"""What a judge reads of an attempt: its transcript as the gateway recorded it, cut by a stated rule.

The transcript is the attempt's conversation(s): every answered call's messages (system, user, assistant
turns with their tool calls, tool results) and the answer the harness received, with a call left out
when the next call's messages start with all of its own and add more (the usual agent loop resends its
history, so the last call holds the whole conversation once). Then, when ``include_stdout``, the tail of the
harness's stdout: where many harnesses print their final answer.

One turn is one JSON line ``{"role": ..., "content": ...}``: text the agent wrote stays inside a JSON
string, so it cannot fake the structure around it (``judge_prompt.py`` adds the delimiters).

Truncation rule (docs/judges.md states it too):

1. A turn longer than ``max_turn_chars`` keeps its first and last halves of that budget, with
   ``[... N characters cut ...]`` between them.
2. If the turns still exceed ``max_transcript_chars``: the first turns are kept up to a quarter of the
   budget (always the first one: the task), the last turns up to the rest, and the turns between them
   are replaced by one line ``{"omitted": "K turns, N characters"}``. The end of an attempt (its answer)
   is what a judge needs most, the start says what was asked.
3. The stdout tail is at most ``max_turn_chars // 2`` characters and always shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harnessrl.conversation import Turn, request_turns, response_turns
from harnessrl.types import Call, CallStatus


def _answer_turn(call: Call) -> Turn | None:
    """The first choice the harness received, as an assistant turn."""
    turns = response_turns(call.response)
    return Turn("assistant", turns[0].text) if turns else None


def conversation_turns(calls: Sequence[Call]) -> list[Turn]:
    """The rollout's conversations once each: a call whose messages the next call resends (and extends,
    normally with its answer and what followed) is covered by that call and skipped."""
    answered = [c for c in calls if c.status == CallStatus.OK and c.purged_at is None]
    requests = [request_turns(c.request) for c in answered]
    out: list[Turn] = []
    for i, (call, sent) in enumerate(zip(answered, requests, strict=True)):
        later = requests[i + 1] if i + 1 < len(requests) else None
        if later is not None and len(later) > len(sent) and later[: len(sent)] == sent:
            continue
        answer = _answer_turn(call)
        out += [*sent, answer] if answer else sent
    return out


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}[... {len(text) - 2 * half} characters cut ...]{text[-half:]}"


def _line(role: str, text: str) -> str:
    return json.dumps({"role": role, "content": text}, ensure_ascii=False)


def render_transcript(calls: Sequence[Call], stdout: str = "", *, max_transcript_chars: int = 12000,
                      max_turn_chars: int = 3000, include_stdout: bool = True) -> str:
    """A rollout's transcript as JSON lines, truncated by the rule in this module's docstring."""
    return render_turns(conversation_turns(calls), stdout if include_stdout else "",
                        max_transcript_chars=max_transcript_chars, max_turn_chars=max_turn_chars)


def render_messages(messages: Sequence[dict[str, Any]], *, max_transcript_chars: int = 12000,
                    max_turn_chars: int = 3000) -> str:
    """A chat transcript given as messages (``judge-check``'s labelled answers), rendered the same way."""
    return render_turns(request_turns({"messages": list(messages)}), "", max_transcript_chars=max_transcript_chars,
                        max_turn_chars=max_turn_chars)


def render_turns(turns: Sequence[Turn], stdout: str = "", *, max_transcript_chars: int = 12000,
                 max_turn_chars: int = 3000) -> str:
    """Turns (and a stdout tail, if any) as JSON lines, truncated by the rule in this module's docstring."""
    lines = [_line(t.role, _cut(t.text, max_turn_chars)) for t in turns]
    total = sum(len(x) + 1 for x in lines)
    if total > max_transcript_chars and len(lines) > 1:
        head: list[str] = [lines[0]]
        used = len(lines[0]) + 1
        for line in lines[1:]:
            if used + len(line) + 1 > max_transcript_chars // 4:
                break
            head.append(line)
            used += len(line) + 1
        tail: list[str] = []
        for line in reversed(lines[len(head):]):
            if used + len(line) + 1 > max_transcript_chars:
                break
            tail.insert(0, line)
            used += len(line) + 1
        dropped = lines[len(head): len(lines) - len(tail)]
        if dropped:
            gap = sum(len(x) + 1 for x in dropped)
            lines = [*head, json.dumps({"omitted": f"{len(dropped)} turns, {gap} characters"}), *tail]
    if stdout.strip():
        tail_text = stdout.strip()[-(max_turn_chars // 2):]
        lines.append(_line("harness stdout (tail)", tail_text))
    return "\n".join(lines) if lines else _line("note", "the attempt made no model call and printed nothing")
