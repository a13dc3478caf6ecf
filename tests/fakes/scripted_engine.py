"""A ``FakeEngine`` that plays a script: the answer to a request is chosen by how many assistant turns its
conversation already holds, so a real harness can be walked through a known trajectory (tool calls with
chosen arguments, then text) while the gateway records it. Same token scheme as ``fake_engine``.
"""

from __future__ import annotations

from typing import Any

import orjson

from .fake_engine import END, FakeEngine, tool_call_tokens


class ScriptedEngine(FakeEngine):
    """``script[k]`` answers turn ``k``: ``{"tool": name, "arguments": {...}}`` or ``{"text": "..."}``.

    Turns past the end repeat the last entry. ``n > 1`` choices all get the same answer.
    """

    def __init__(self, script: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not script:
            raise ValueError("a script needs at least one step")
        self.script = script

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        turn = sum(1 for m in body.get("messages") or () if m.get("role") == "assistant")
        step = self.script[min(turn, len(self.script) - 1)]
        if "tool" in step:
            args = orjson.dumps(step["arguments"]).decode()
            call = {"id": f"call_{turn}_{index}", "type": "function",
                    "function": {"name": step["tool"], "arguments": args}}
            return [*tool_call_tokens(step["tool"], args), END], "tool_calls", call
        return [*str(step["text"]).encode(), END], "stop", None
