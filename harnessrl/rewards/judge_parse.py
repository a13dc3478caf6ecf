"""Reading a judge's answer strictly: a score in [0, 1] and a reason, or ``JudgeParseError``.

Never a silent 0: an answer that is not the requested JSON (or does not match ``score_regex``), a score
outside [0, 1], a group answer that misses an attempt or names one twice, all raise, and the judge asks
again (``retries``) before the rollout becomes an infra failure of the judge. The only leniency: one
Markdown code fence around the whole answer is removed (models add it even when asked not to).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harnessrl.rewards.judge_prompt import Mode

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class JudgeParseError(ValueError):
    """The judge's answer is not a valid score; the message says what was wrong (it is shown and recorded)."""


class Scored(BaseModel):
    model_config = ConfigDict(extra="ignore")

    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    reason: str = Field(max_length=4000)


class GroupScored(Scored):
    id: str


class GroupAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    scores: list[GroupScored]


def response_format(mode: Mode) -> dict[str, Any]:
    """OpenAI ``response_format`` asking for the answer's JSON schema (vLLM: guided decoding)."""
    schema = (Scored if mode == "pointwise" else GroupAnswer).model_json_schema()
    return {"type": "json_schema", "json_schema": {"name": f"judge_{mode}", "schema": schema, "strict": False}}


def _json(text: str) -> Any:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"the answer is not JSON ({exc.msg} at {exc.pos}): {body[:200]!r}") from None


def _check(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "answer"
        raise JudgeParseError(f"{where}: {first['msg']} (got {json.dumps(data)[:200]})") from None


def parse_pointwise(text: str, score_regex: str | None = None) -> tuple[float, str]:
    """``(score, reason)`` of a pointwise answer: JSON, or the config's regex (groups ``score``, ``reason``)."""
    if score_regex is None:
        answer = _check(Scored, _json(text))
        return answer.score, answer.reason
    match = re.search(score_regex, text)
    if match is None:
        raise JudgeParseError(f"score_regex {score_regex!r} does not match the answer: {text[:200]!r}")
    groups = match.groupdict()
    try:
        score = float(groups["score"])
    except (TypeError, ValueError):
        raise JudgeParseError(f"score_regex matched {groups['score']!r}, which is not a number") from None
    answer = _check(Scored, {"score": score, "reason": (groups.get("reason") or text).strip()[:4000]})
    return answer.score, answer.reason


def parse_group(text: str, ids: Sequence[str]) -> list[tuple[float, str]]:
    """One ``(score, reason)`` per attempt id, in the order of ``ids``; every id exactly once."""
    answer = _check(GroupAnswer, _json(text))
    by_id: dict[str, GroupScored] = {}
    for entry in answer.scores:
        key = entry.id.strip().upper()
        if key in by_id:
            raise JudgeParseError(f"attempt {entry.id!r} is scored twice")
        by_id[key] = entry
    missing = [i for i in ids if i not in by_id]
    unknown = sorted(set(by_id) - set(ids))
    if missing or unknown:
        raise JudgeParseError(f"the answer must score attempts {list(ids)} once each; missing {missing}, "
                              f"unknown {unknown}")
    return [(by_id[i].score, by_id[i].reason) for i in ids]
