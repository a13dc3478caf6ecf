"""``Judge``: a model grader as a reward source, whose calls are recorded as judge calls of the rollout.

For work without tests (support, research, writing) a model reads the task, a rubric and the attempt's
transcript as the gateway recorded it, and answers a score in [0, 1] with a reason:

- ``pointwise``: one judge call per attempt.
- ``group``: one call scores all attempts of a group relative to each other (as OpenPipe ART's RULER
  does): cheaper, and better calibrated for GRPO, which only uses scores relative to the group anyway.

The judge's answer is parsed strictly (``judge_parse.py``); an unparseable answer or a failed request is
retried ``retries`` times, then the attempt(s) get a ``Verdict`` with an ``error``: scoring makes them
infra failures of the judge (never a silent 0). Requests run at most ``concurrency`` at once for the
whole run; answers are cached by rubric and transcript hashes (``judge_cache.py``). The prompt keeps the
transcript as quoted data (``judge_prompt.py``). Every judging is written to the store's ``judge_calls``
(model, latency, reason, prompt and raw answer), never to ``calls``: it is not trained.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.redaction.text import DEFAULT_REDACTIONS, Redactor
from harnessrl.rewards.config import JudgeConfig
from harnessrl.rewards.judge_cache import JudgeCache, cache_key
from harnessrl.rewards.judge_client import JudgeClient, JudgeRequestError, JudgeSetupError, api_key

__all__ = ["JUDGE", "Judge", "JudgeItem", "JudgeSetupError", "Verdict", "make_judge"]
from harnessrl.rewards.judge_parse import JudgeParseError, parse_group, parse_pointwise, response_format
from harnessrl.rewards.judge_prompt import JudgeItem, PromptBuilder, attempt_ids, guarded_messages
from harnessrl.rewards.judge_transcript import render_transcript
from harnessrl.runners.spec import AttemptResult, AttemptSpec
from harnessrl.store import Store
from harnessrl.store.judge_calls import JudgeCall, JudgeCallStore

log = logging.getLogger(__name__)

#: The reward name of the judge's score (the component ``weights`` and ``combine`` refer to).
JUDGE = "judge"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge's score of one attempt (``error`` set and ``score`` None when it could not say)."""

    score: float | None
    reason: str | None
    error: str | None = None
    cached: bool = False


class Judge:
    """Scores attempts with a judge model over HTTP; one per run, shared by all its attempts."""

    def __init__(self, config: JudgeConfig, *, url: str, store: JudgeCallStore | None, base_dir: Path | None = None,
                 prompt: PromptBuilder = guarded_messages, redact_patterns: Sequence[str] = DEFAULT_REDACTIONS) -> None:
        self.config = config
        self.store = store
        self.prompt = prompt
        #: Secrets out of what leaves for the judge (an endpoint elsewhere) and what its record keeps: the
        #: calls are stored redacted already, but the task input and the harness's stdout are not.
        self.redact = Redactor(redact_patterns)
        self.cache = JudgeCache(store if config.cache else None)
        self._use_cache = config.cache
        self._client = JudgeClient(url, key=api_key(config.api_key_env), timeout_s=config.timeout_s)
        self._slots = asyncio.Semaphore(config.concurrency)
        self._model = config.model
        self.rubric = config.rubric
        if config.rubric_file is not None:
            path = Path(config.rubric_file)
            path = path if path.is_absolute() or base_dir is None else base_dir / path
            try:
                self.rubric = path.read_text()
            except OSError as exc:
                raise JudgeSetupError(f"[rewards.judge] rubric_file {path}: {exc.strerror}") from None

    async def model(self) -> str:
        if self._model is None:
            self._model = await self._client.first_model()
        return self._model

    async def preflight(self) -> None:
        """Fail at the start of a run, not at the first scored group, when the endpoint cannot be reached."""
        if self._model is None:
            await self.model()
        else:
            await self._client.reachable()

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- what the judge reads -------------------------------------------------------------------------
    def rubric_for(self, task_rubric: str | None) -> str:
        rubric = task_rubric or self.rubric
        if not rubric:
            raise JudgeSetupError("the judge has no rubric for this task: set [rewards.judge] rubric (or "
                                  "rubric_file), or give the task a \"rubric\" field in its JSONL line")
        return rubric

    def item(self, spec: AttemptSpec, result: AttemptResult, store: Store) -> JudgeItem:
        """An attempt as the judge sees it: task input, rubric, transcript from the recorded calls."""
        c = self.config
        transcript = render_transcript(store.get_calls(spec.rollout_id), self.redact(result.stdout),
                                       max_transcript_chars=c.max_transcript_chars,
                                       max_turn_chars=c.max_turn_chars, include_stdout=c.include_stdout)
        return JudgeItem(self.redact(dict(spec.task_input)), self.rubric_for(spec.assets.rubric),
                         self.redact(transcript), spec.rollout_id)

    # -- judging --------------------------------------------------------------------------------------
    async def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One verdict per item, in order: one call for the group, or one call per item (pointwise)."""
        if not items:
            return []
        if self.config.mode == "group":
            return await self.judge_call(items)
        verdicts = await asyncio.gather(*(self.judge_call([item]) for item in items))
        return [v[0] for v in verdicts]

    async def judge_call(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """One judging of ``items`` (all of one task): cached, or asked with retries; recorded."""
        mode = "pointwise" if len(items) == 1 and self.config.mode == "pointwise" else "group"
        try:
            model = await self.model()
        except JudgeSetupError as exc:
            return [Verdict(None, None, str(exc)) for _ in items]
        key = cache_key(model, mode, items)
        cached = await asyncio.to_thread(self.cache.get, key, len(items)) if self._use_cache else None
        if cached is not None:
            verdicts = [Verdict(s, r, cached=True) for s, r in cached]
            await asyncio.to_thread(self._record, items, verdicts, model=model, mode=mode, key=key, attempts=0,
                                    latency=0.0)
            return verdicts
        ids = attempt_ids(len(items))
        messages = self.prompt(items, mode)
        body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": self.config.max_tokens,
                                "temperature": self.config.temperature}
        if self.config.json_schema and self.config.score_regex is None:
            body["response_format"] = response_format(mode)
        error, answer, attempts, started = "", "", 0, time.perf_counter()
        async with self._slots:
            for attempts in range(1, self.config.retries + 2):
                try:
                    answer, _ = await self._client.complete(body)
                    if mode == "pointwise":
                        scores = [parse_pointwise(answer, self.config.score_regex)]
                    else:
                        scores = parse_group(answer, ids)
                    break
                except (JudgeRequestError, JudgeParseError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    log.warning("judge attempt %d of %d failed: %s", attempts, self.config.retries + 1, error)
            else:
                scores = []
        latency = time.perf_counter() - started
        if not scores:
            why = f"judge gave no valid score after {attempts} tries; last: {error}"
            verdicts = [Verdict(None, None, why) for _ in items]
        else:
            verdicts = [Verdict(s, r) for s, r in scores]
            if self._use_cache:
                self.cache.put(key, scores)
        await asyncio.to_thread(self._record, items, verdicts, model=model, mode=mode, key=key, attempts=attempts,
                                latency=latency, request=json.dumps(body, ensure_ascii=False),
                                response=answer or None)
        return verdicts

    def _record(self, items: Sequence[JudgeItem], verdicts: Sequence[Verdict], *, model: str, mode: str,
                key: str, attempts: int, latency: float, request: str | None = None,
                response: str | None = None) -> None:
        if self.store is None or any(item.rollout_id is None for item in items):
            return
        call_id = uuid.uuid4().hex
        rows = []
        for position, (item, v) in enumerate(zip(items, verdicts, strict=True)):
            status = "cached" if v.cached else ("error" if v.error else "ok")
            rows.append(JudgeCall(
                rollout_id=str(item.rollout_id), call_id=call_id, position=position, mode=mode, model=model,
                status=status, score=v.score, reason=v.reason, error=v.error, attempts=attempts,
                latency_s=latency, cache_key=key, request=request if position == 0 else None,
                response=response if position == 0 else None))
        self.store.add_judge_calls(rows)


def make_judge(config: JudgeConfig, store: JudgeCallStore | None, *, policy_urls: Sequence[str] = (),
               base_dir: Path | None = None, redact_patterns: Sequence[str] = DEFAULT_REDACTIONS) -> Judge:
    """The run's judge; ``url = "policy"`` takes the first engine URL of the run (its own policy)."""
    url = config.url
    if url == "policy":
        if not policy_urls:
            raise JudgeSetupError('[rewards.judge] url = "policy" needs the run\'s engine, and there is none')
        url = policy_urls[0]
    return Judge(config, url=url, store=store, base_dir=base_dir, redact_patterns=redact_patterns)
