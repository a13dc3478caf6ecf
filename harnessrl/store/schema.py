"""The core record's tables, written once for SQLite and PostgreSQL; a feature store declares its own
(``StoreFeature``: judge calls, production's deployments, feedback and canary decisions) and the same
rules hold for them.

Portable on purpose: ids are TEXT, JSON documents are TEXT (orjson), times are DOUBLE PRECISION Unix
seconds, arrays are ``{blob}`` (BLOB in SQLite, BYTEA in PostgreSQL) and no autoincrement: every row
key is assigned by the store (per-rollout call and reward indices), so both drivers number rows alike.

A call's prompt is stored as ``(parent_index, prefix_len, prompt_suffix)``: the first ``prefix_len``
tokens of the parent call's prompt + choice-0 completion, then the suffix. ``choices`` is JSON
``[[n_token_ids, n_logprobs, finish_reason], ...]`` describing how ``completion_ids`` and
``completion_logprobs`` (all choices concatenated) split per choice. ``request`` likewise holds only
what the parent's request lacks: ``request_keep`` (JSON ``{key: n}``, NULL if nothing is shared) says
that top-level list or string ``key`` starts with the first ``n`` items of the parent's.
``response`` leaves out what repeats the call's own prompt: ``response_elided`` (JSON, NULL if nothing) lists
the paths (``[["prompt_token_ids"]]``, ``[["choices", 0, "prompt_token_ids"]]``) whose value was exactly
the prompt's token IDs, which a client that asks for token IDs is sent (vLLM's ``return_token_ids``): with
a long agent prompt they were most of the row.

Retention (``harnessrl purge``, ``retention.py``) empties a rollout's calls all at once, so no kept call
ever refers to a purged parent: ``purged_at`` set means ``request`` is ``{}``, ``request_keep``,
``response`` and ``response_elided`` NULL and the three arrays empty, while every other column (ids, times,
status, policy version, latency, ``prompt_len``, ``choices``) stays. ``runs.ended_at`` says a run no longer
needs its data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgresql"]
_CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")

#: Bump when the tables change and add the step to ``MIGRATIONS``.
SCHEMA_VERSION = 6

#: ``MIGRATIONS[v]`` upgrades a database from version ``v`` to ``v + 1``.
_TASK_INDEX = "CREATE INDEX IF NOT EXISTS rollouts_by_task ON rollouts (run_id, task_id, created_at, id)"


MIGRATIONS: dict[int, list[str]] = {
    1: [_TASK_INDEX],  # the dashboard filters a run's rollouts by task
    2: [  # retention: a run's end, and what was purged
        "ALTER TABLE runs ADD COLUMN ended_at DOUBLE PRECISION",
        "ALTER TABLE rollouts ADD COLUMN purged_at DOUBLE PRECISION",
        "ALTER TABLE calls ADD COLUMN purged_at DOUBLE PRECISION",
    ],
    3: [],  # judge calls of a rollout: their tables are the feature's (``judge_calls.py``)
    4: [],  # production mode: deployments, app keys, sessions, feedback, canary (``deployments.py``,
    #         ``feedback.py``, ``canary.py``)
    5: ["ALTER TABLE calls ADD COLUMN response_elided TEXT"],  # a response's copy of the prompt, not stored twice
}


@dataclass(frozen=True)
class StoreFeature:
    """The tables a feature store adds to the core record (``assembly.py`` mixes the feature in).

    ``tables``: idempotent DDL (``IF NOT EXISTS``), created with the core tables in a new database;
    ``added_by``: the ``MIGRATIONS`` step that first added them, run on an older database.
    """

    name: str
    added_by: int
    tables: tuple[str, ...]


_TABLES = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at);
CREATE TABLE IF NOT EXISTS tasks (
    run_id TEXT NOT NULL REFERENCES runs (id),
    id TEXT NOT NULL,
    input TEXT NOT NULL,
    split TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
);
CREATE INDEX IF NOT EXISTS tasks_by_position ON tasks (run_id, position);
CREATE TABLE IF NOT EXISTS rollouts (
    id TEXT PRIMARY KEY,
    run_id TEXT REFERENCES runs (id),
    task_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    input TEXT NOT NULL,
    api_key_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    step INTEGER,
    failure_kind TEXT,
    error TEXT,
    exit_code INTEGER,
    logs TEXT,
    runner_handle TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    metadata TEXT NOT NULL,
    purged_at DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS rollouts_by_created ON rollouts (created_at, id);
CREATE INDEX IF NOT EXISTS rollouts_by_run ON rollouts (run_id, created_at, id);
CREATE INDEX IF NOT EXISTS rollouts_by_run_step ON rollouts (run_id, step, created_at, id);
CREATE INDEX IF NOT EXISTS rollouts_by_status ON rollouts (status, created_at, id);
CREATE INDEX IF NOT EXISTS rollouts_by_step ON rollouts (step, created_at, id);
CREATE INDEX IF NOT EXISTS rollouts_by_group ON rollouts (group_id);
{task_index};
CREATE TABLE IF NOT EXISTS calls (
    rollout_id TEXT NOT NULL REFERENCES rollouts (id),
    call_index INTEGER NOT NULL,
    api TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    request_keep TEXT,
    response TEXT,
    parent_index INTEGER,
    prefix_len INTEGER NOT NULL,
    prompt_len INTEGER NOT NULL,
    prompt_suffix {blob} NOT NULL,
    completion_ids {blob} NOT NULL,
    completion_logprobs {blob} NOT NULL,
    choices TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    requested_model TEXT,
    sampling TEXT NOT NULL,
    engine_id TEXT,
    latency_s DOUBLE PRECISION,
    error TEXT,
    fidelity TEXT,
    fidelity_reason TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    purged_at DOUBLE PRECISION,
    response_elided TEXT,
    PRIMARY KEY (rollout_id, call_index)
);
CREATE TABLE IF NOT EXISTS rewards (
    rollout_id TEXT NOT NULL REFERENCES rollouts (id),
    reward_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    call_index INTEGER,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (rollout_id, reward_index)
);
CREATE TABLE IF NOT EXISTS policy_versions (
    run_id TEXT REFERENCES runs (id),
    version INTEGER NOT NULL,
    checkpoint_path TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    metadata TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS policy_versions_unique ON policy_versions (COALESCE(run_id, ''), version);
CREATE INDEX IF NOT EXISTS policy_versions_by_run ON policy_versions (run_id, version);
"""


def ddl(dialect: Dialect) -> list[str]:
    """The core record's CREATE statements for ``dialect``, one per list item (idempotent: IF NOT EXISTS);
    a driver adds its features' (``features_ddl``)."""
    blob = {"sqlite": "BLOB", "postgresql": "BYTEA"}[dialect]
    text = _TABLES.replace("{blob}", blob).replace("{task_index}", _TASK_INDEX)
    return [stmt.strip() for stmt in text.split(";") if stmt.strip()]


def features_ddl(features: Sequence[StoreFeature]) -> list[str]:
    """The features' CREATE statements, in the order given (a table's references come first)."""
    return [stmt for f in features for stmt in f.tables]


def feature_tables(features: Sequence[StoreFeature]) -> list[str]:
    """The names of the tables the features create."""
    return [m.group(1) for stmt in features_ddl(features) if (m := _CREATE_TABLE.match(stmt))]


def with_features(migrations: dict[int, list[str]], features: Sequence[StoreFeature]) -> dict[int, list[str]]:
    """``migrations`` with each feature's tables added to the step that first added them."""
    out = {v: list(steps) for v, steps in migrations.items()}
    for f in features:
        out[f.added_by] = [*out[f.added_by], *f.tables]
    return out
