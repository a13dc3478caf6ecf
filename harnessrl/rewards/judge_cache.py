"""Judge scores reused instead of paid twice: keyed by the rubric and the transcripts' hashes.

The key also covers what else changes the answer: the judge model, the mode, the task input and, in
group mode, the order of the attempts (a group answer scores attempts relative to each other). A hit
comes from this process's memory, else from the store (``judge_calls`` rows with the same key), so a
resumed or repeated run finds what an earlier one paid for. Only answered, parsed judgings are cached.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from harnessrl.rewards.judge_prompt import JudgeItem, Mode
from harnessrl.store.judge_calls import JudgeCallStore

#: Bumped when the prompt changes what a judge sees (an old answer would no longer be for this prompt).
PROMPT_VERSION = 1


def transcript_hash(transcript: str) -> str:
    return hashlib.sha256(transcript.encode()).hexdigest()


def cache_key(model: str, mode: Mode, items: Sequence[JudgeItem]) -> str:
    first = items[0]
    parts = [PROMPT_VERSION, model, mode, first.rubric, json.dumps(dict(first.task_input), sort_keys=True),
             [transcript_hash(i.transcript) for i in items]]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


class JudgeCache:
    """``get``/``put`` of ``[(score, reason), ...]`` per key; the store is read on a miss in memory."""

    def __init__(self, store: JudgeCallStore | None, max_entries: int = 100_000) -> None:
        self.store = store
        self.max_entries = max_entries
        self._memory: dict[str, list[tuple[float, str]]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str, n: int) -> list[tuple[float, str]] | None:
        found = self._memory.get(key)
        if found is None and self.store is not None:
            rows = self.store.cached_judgement(key)
            if len(rows) == n and all(r.score is not None for r in rows):
                found = [(float(r.score or 0.0), r.reason or "") for r in rows]
                self._memory[key] = found
        if found is None or len(found) != n:
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, key: str, scores: list[tuple[float, str]]) -> None:
        if len(self._memory) >= self.max_entries:
            self._memory.pop(next(iter(self._memory)))
        self._memory[key] = scores
