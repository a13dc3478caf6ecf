"""``harnessrl import`` of ATIF trajectories: each one a rollout whose agent steps are its calls.

A trajectory whose trained agent steps all carry ``metrics.prompt_token_ids`` and ``completion_token_ids``
is imported token for token: each step is one call with exactly those tokens and ``metrics.logprobs``, so the
trainer builds its samples from what the engine saw and sampled (a step without logprobs is marked as having
unknown behaviour logprobs: SFT trains it, RL leaves it out). A trajectory without them is rendered as a chat
conversation with the policy's template and marked ``retokenized``, exactly as OpenAI-style conversations
are (``harnessrl/importer.py``). Steps the policy did not write are context, never trained: ``is_copied_context``,
``llm_call_count = 0``, and agent steps the export marked ``"sampled": false``.

Input: a ``.json`` file (one trajectory), a ``.jsonl`` file (one per line), or a folder: its ``*.json`` files,
or, in a Harbor job folder, every ``*/agent/trajectory.json`` with the reward from the trial's ``result.json``.
Every file is validated (``harnessrl/atif/schema.py``) before anything is written; an error names the file
and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from harnessrl.atif.schema import READ_VERSIONS, ContentPart, Step, Trajectory
from harnessrl.importer import ImportFormatError, ImportReport, finish_rollout, new_run, tokenize_conversation
from harnessrl.store import Store
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens


class AtifFormatError(ImportFormatError):
    """An ATIF file this version cannot import: the message names the file and the field."""


@dataclass(slots=True)
class Source:
    """One trajectory read from disk: where it came from, and a Harbor trial's verifier rewards."""

    label: str
    trajectory: Trajectory
    harbor_rewards: dict[str, float] = field(default_factory=dict)
    harbor_task: str | None = None


def is_atif(path: str | Path) -> bool:
    """Whether ``harnessrl import`` should read ``path`` as ATIF: a folder, a ``.json`` file, or JSON Lines
    whose first record has a ``schema_version`` or ``steps`` (exports and conversations have neither)."""
    p = Path(path)
    if p.is_dir() or p.suffix == ".json":
        return True
    if p.suffix != ".jsonl" or not p.is_file():
        return False
    with p.open("rb") as f:
        for line in f:
            if line.strip():
                try:
                    first = orjson.loads(line)
                except orjson.JSONDecodeError:
                    return False
                return isinstance(first, dict) and bool({"schema_version", "steps"} & first.keys())
    return False


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate(doc: Any, label: str) -> Trajectory:
    """``doc`` as a ``Trajectory``, or an ``AtifFormatError`` naming ``label`` and the offending field."""
    if not isinstance(doc, dict):
        raise AtifFormatError(f"{label}: not an ATIF trajectory (a JSON object with schema_version, agent, steps)")
    version = doc.get("schema_version")
    if version not in READ_VERSIONS:
        raise AtifFormatError(f"{label}: schema_version is {version!r}; this harnessrl reads {READ_VERSIONS[0]} "
                              f"to {READ_VERSIONS[-1]} (Harbor's Agent Trajectory Interchange Format)")
    if not isinstance(doc.get("steps"), list) or not doc["steps"]:
        raise AtifFormatError(f"{label}: steps is {'missing' if 'steps' not in doc else 'empty or not a list'}: "
                              "an ATIF trajectory is a non-empty array of steps")
    try:
        return Trajectory.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        shown = "; ".join(f"{_where(e['loc']) or 'trajectory'}: {e['msg']}" for e in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise AtifFormatError(f"{label}: {shown}{more}") from None


def _load_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise AtifFormatError(f"{path}: not JSON ({exc})") from None


def _harbor_result(trial: Path) -> tuple[dict[str, float], str | None]:
    """A Harbor trial's verifier rewards and task name (``result.json``), when it has one."""
    result = trial / "result.json"
    if not result.is_file():
        return {}, None
    doc = _load_json(result)
    rewards = ((doc.get("verifier_result") or {}).get("rewards") or {}) if isinstance(doc, dict) else {}
    task = doc.get("task_name") if isinstance(doc, dict) else None
    return ({k: float(v) for k, v in rewards.items() if isinstance(v, int | float)},
            task if isinstance(task, str) else None)


def read_sources(path: str | Path) -> list[Source]:
    """Every trajectory under ``path``, validated (see the module docstring for what is read)."""
    path = Path(path)
    if path.is_dir():
        trials = sorted(path.rglob("agent/trajectory.json"))
        if trials:  # a Harbor job: the reward sits in each trial's result.json
            out = []
            for t in trials:
                rewards, task = _harbor_result(t.parent.parent)
                out.append(Source(str(t), validate(_load_json(t), str(t)), rewards, task))
            return out
        files = sorted(path.glob("*.json"))
        if not files:
            raise AtifFormatError(f"{path}: no *.json trajectories (nor Harbor's */agent/trajectory.json) in it")
        return [Source(str(f), validate(_load_json(f), str(f))) for f in files]
    if path.suffix == ".jsonl":
        out = []
        for n, line in enumerate(path.read_bytes().splitlines(), start=1):
            if line.strip():
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise AtifFormatError(f"{path}:{n}: not JSON ({exc})") from None
                out.append(Source(f"{path}:{n}", validate(doc, f"{path}:{n}")))
        return out
    return [Source(str(path), validate(_load_json(path), str(path)))]


# -- one trajectory -----------------------------------------------------------------------------------
def _trained(step: Step) -> bool:
    """An agent step the policy wrote in this trajectory: a call to train (context steps are not)."""
    extra = step.extra or {}
    return (step.source == "agent" and not step.is_copied_context and step.llm_call_count != 0
            and extra.get("sampled", True) is not False)


def _text(content: str | list[ContentPart] | None, counts: dict[str, int]) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    images = sum(p.type == "image" for p in content)
    counts["images_dropped"] = counts.get("images_dropped", 0) + images
    return "".join(p.text or "" for p in content if p.type == "text")


def to_messages(traj: Trajectory, counts: dict[str, int]) -> tuple[list[dict[str, Any]], list[int]]:
    """The trajectory as OpenAI chat messages, and the indices of the assistant messages to train."""
    messages: list[dict[str, Any]] = []
    trained: list[int] = []
    for step in traj.steps:
        text = _text(step.message, counts)
        if step.source != "agent":
            messages.append({"role": step.source, "content": text})
        else:
            raw = (step.extra or {}).get("raw_arguments") or {}
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if step.reasoning_content:
                msg["reasoning_content"] = step.reasoning_content
            if step.tool_calls:
                msg["tool_calls"] = [{"id": c.tool_call_id, "type": "function", "function": {
                    "name": c.function_name, "arguments": raw.get(c.tool_call_id) or json.dumps(c.arguments)}}
                    for c in step.tool_calls]
            if _trained(step):
                trained.append(len(messages))
            messages.append(msg)
        for r in step.observation.results if step.observation else ():
            content = _text(r.content, counts)
            messages.append({"role": "tool", "tool_call_id": r.source_call_id, "content": content}
                            if r.source_call_id else {"role": "user", "content": content})
    return messages, trained


@dataclass(slots=True)
class _Call:
    """A call to record: tokens, the original call index (for per-call rewards), version and sampling."""

    index: int
    prompt: list[int]
    choices: list[ChoiceTokens]
    version: int
    sampling: dict[str, Any]


def _exact_calls(src: Source, default_version: int, counts: dict[str, int]) -> list[_Call] | None:
    """The trained steps as calls with their recorded tokens; None when any of them lacks token IDs."""
    steps = [s for s in src.trajectory.steps if _trained(s)]
    if not steps or any(s.metrics is None or s.metrics.prompt_token_ids is None
                        or s.metrics.completion_token_ids is None for s in steps):
        return None  # (an empty list is kept: a call the recorder stored without tokens, untrained as before)
    calls = []
    for n, s in enumerate(steps):
        m, extra = s.metrics, s.extra or {}
        assert m is not None and m.prompt_token_ids is not None and m.completion_token_ids is not None
        sampling = dict(extra.get("sampling") or {})
        choices = [ChoiceTokens(list(m.completion_token_ids), list(m.logprobs or ()), extra.get("finish_reason"))]
        for c in (m.extra or {}).get("choices") or ():  # n > 1 (a harnessrl export; anything else is ignored)
            if isinstance(c, dict) and isinstance(c.get("completion_token_ids"), list):
                choices.append(ChoiceTokens(list(c["completion_token_ids"]), list(c.get("logprobs") or ()),
                                            c.get("finish_reason")))
        if any(len(c.logprobs) != len(c.token_ids) for c in choices):
            sampling["retokenized"] = (f"token IDs from {Path(src.label).name} without logprobs: behaviour "
                                       "logprobs unknown")
            choices = [ChoiceTokens(c.token_ids, [0.0] * len(c.token_ids), c.finish_reason) for c in choices]
            counts["steps_without_logprobs"] = counts.get("steps_without_logprobs", 0) + 1
        calls.append(_Call(int(extra.get("call_index", n)), list(m.prompt_token_ids), choices,
                           int(extra.get("policy_version", default_version)), sampling))
    return calls


def _retokenized_calls(src: Source, tokenizer: Any, model: str, counts: dict[str, int]) -> list[_Call]:
    traj = src.trajectory
    messages, trained = to_messages(traj, counts)
    reason = f"re-tokenized from text with {model}'s chat template (imported from {Path(src.label).name})"
    turns = tokenize_conversation(tokenizer, messages, traj.agent.tool_definitions, only=set(trained))
    counts["boundary_changed"] = counts.get("boundary_changed", 0) + sum(t.boundary_changed for t in turns)
    return [_Call(n, t.prompt, [ChoiceTokens(t.completion, [0.0] * len(t.completion), "stop")], 0,
                  {"retokenized": reason}) for n, t in enumerate(turns)]


def _rewards(src: Source) -> Iterator[tuple[str, float, int | None]]:
    """(name, value, original call index) of the trajectory's rewards: a harnessrl export's list, else its
    ``extra.reward``, else the Harbor trial's verifier rewards ("reward" is the outcome: ``final``)."""
    extra = src.trajectory.extra or {}
    if isinstance(extra.get("rewards"), list):
        for w in extra["rewards"]:
            yield str(w["name"]), float(w["value"]), w.get("call_index")
    elif isinstance(extra.get("reward"), int | float):
        yield "final", float(extra["reward"]), None
    else:
        for name, value in src.harbor_rewards.items():
            yield ("final" if name == "reward" else name), value, None


def _ours(traj: Trajectory) -> dict[str, Any]:
    """The rollout fields a harnessrl export keeps in ``extra.harnessrl`` (empty for other producers)."""
    ours = (traj.extra or {}).get("harnessrl")
    return ours if isinstance(ours, dict) else {}


def import_atif(store: Store, path: str | Path, *, tokenizer_spec: str | None = None,
                run_id: str | None = None) -> ImportReport:
    """Import every trajectory under ``path`` into one new run (see the module docstring)."""
    counts: dict[str, int] = {}
    planned = [(s, _exact_calls(s, int(_ours(s.trajectory).get("policy_version") or 0), counts))
               for s in read_sources(path)]
    tokenizer: Any = None
    missing = next((s.label for s, calls in planned if calls is None), None)
    if missing is not None:
        if tokenizer_spec is None:
            raise AtifFormatError(f"{missing}: its agent steps carry no metrics.prompt_token_ids and "
                                  "completion_token_ids, so importing it needs the policy's tokenizer (--into "
                                  "CONFIG uses [engine] model, or pass --tokenizer MODEL)")
        from harnessrl.models import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_spec)
    run_id = new_run(store, run_id, str(path), "atif")
    report = ImportReport(run_id=run_id, kind="atif")
    for src, exact in planned:
        traj, ours = src.trajectory, _ours(src.trajectory)
        kind = "trajectories.exact" if exact is not None else "trajectories.retokenized"
        counts[kind] = counts.get(kind, 0) + 1
        calls = exact if exact is not None else _retokenized_calls(src, tokenizer, str(tokenizer_spec), counts)
        digest = hashlib.sha256(orjson.dumps(traj.steps[0].model_dump(mode="json"))).hexdigest()[:12]
        task_id = str(ours.get("task_id") or src.harbor_task or traj.session_id or f"atif-{digest}")
        rollout = store.create_rollout(
            task_id=task_id, input={}, group_id=str(ours.get("group_id") or f"{run_id}-{task_id}"),
            api_key_hash="imported", policy_version=int(ours.get("policy_version") or 0), run_id=run_id,
            step=ours.get("step"), metadata={"split": ours.get("split") or "train", "imported_from": src.label,
                                             "session_id": traj.session_id})
        new_index: dict[int, int] = {}
        for c in calls:
            (new_index[c.index],) = store.record_calls([NewCall(
                rollout.id, ApiKind.CHAT, CallStatus.OK, {}, None, c.prompt, c.choices, c.version,
                requested_model=traj.agent.model_name, sampling=c.sampling)])
        for name, value, ci in _rewards(src):
            store.add_reward(rollout.id, value, name, None if ci is None else new_index.get(int(ci)))
        finish_rollout(store, rollout.id, str(ours.get("status") or "succeeded"), ours.get("failure_kind"))
        report.rollouts += 1
        report.calls += len(calls)
    report.counts.update({k: v for k, v in counts.items() if v})
    return report
