"""HttpTeacher reads vLLM's ``prompt_logprobs`` (a real loopback HTTP server speaking vLLM's dialect)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_engine import EngineServer, FakeEngine, logprob_of  # noqa: E402

from harnessrl.sft.distill import HttpTeacher  # noqa: E402


class PromptLogprobEngine(FakeEngine):
    """vLLM's shape: ``choices[0].prompt_logprobs`` = [None, {"<id>": {"logprob", "rank", "decoded_token"}}, ...]."""

    def __init__(self, *, drop: bool = False) -> None:
        super().__init__(model="teacher")
        self.drop = drop

    def _response(self, body: dict, prompt: list[int], choices: list, chat: bool) -> dict:
        out: dict[str, Any] = super()._response(body, prompt, choices, chat)
        if body.get("prompt_logprobs") is not None and not self.drop:
            out["choices"][0]["prompt_logprobs"] = [None] + [
                {str(t): {"logprob": logprob_of(t), "rank": 1, "decoded_token": "x"}} for t in prompt[1:]]
        return out


def test_prompt_logprobs_become_per_token_teacher_logprobs() -> None:
    server = EngineServer(PromptLogprobEngine()).start()
    try:
        teacher = HttpTeacher(server.url)
        assert teacher.model == "teacher"
        seqs = [[5, 9, 200, 3], [7, 8]]
        assert teacher.logprobs(seqs) == [[0.0] + [logprob_of(t) for t in s[1:]] for s in seqs]
        sent = server.engine.requests[-1]
        assert sent["prompt"] == [7, 8] and sent["prompt_logprobs"] == 0 and sent["max_tokens"] == 1
    finally:
        server.stop()


def test_a_server_without_prompt_logprobs_is_an_error_that_says_what_is_needed() -> None:
    server = EngineServer(PromptLogprobEngine(drop=True)).start()
    try:
        with pytest.raises(RuntimeError, match="vLLM server \\(prompt_logprobs\\) sharing the student's tokenizer"):
            HttpTeacher(server.url).logprobs([[1, 2, 3]])
    finally:
        server.stop()
