"""The store's tables, written once for SQLite and PostgreSQL.

Portable on purpose: ids are TEXT, JSON documents are TEXT (orjson), times are DOUBLE PRECISION Unix
seconds, arrays are ``{blob}`` (BLOB in SQLite, BYTEA in PostgreSQL) and no autoincrement: every row
key is assigned by the store (per-rollout call and reward indices), so both drivers number rows alike.

A call's prompt is stored as ``(parent_index, prefix_len, prompt_suffix)``: the first ``prefix_len``
tokens of the parent call's prompt + choice-0 completion, then the suffix. ``choices`` is JSON
``[[n_token_ids, n_logprobs, finish_reason], ...]`` describing how ``completion_ids`` and
``completion_logprobs`` (all choices concatenated) split per choice. ``request`` likewise holds only
what the parent's request lacks: ``request_keep`` (JSON ``{key: n}``, NULL if nothing is shared) says
that top-level list or string ``key`` starts with the first ``n`` items of the parent's.

Retention (``harnessrl purge``, ``retention.py``) empties a rollout's calls all at once, so no kept call
ever refers to a purged parent: ``purged_at`` set means ``request`` is ``{}``, ``request_keep`` and
``response`` NULL and the three arrays empty, while every other column (ids, times, status, policy
version, latency, ``prompt_len``, ``choices``) stays. ``runs.ended_at`` says a run no longer needs its data.
"""

from __future__ import annotations

from typing import Literal

Dialect = Literal["sqlite", "postgresql"]

#: Bump when the tables change and add the step to ``MIGRATIONS``.
SCHEMA_VERSION = 5

#: ``MIGRATIONS[v]`` upgrades a database from version ``v`` to ``v + 1``.
_TASK_INDEX = "CREATE INDEX IF NOT EXISTS rollouts_by_task ON rollouts (run_id, task_id, created_at, id)"

#: What a model judge answered about a rollout (``rewards/judge.py``): never trained. One judge call may
#: score several rollouts at once (group mode): each gets a row, the rows share ``call_id`` and only
#: ``position`` 0 keeps the prompt (``request``) and raw answer (``response``). ``status``: ``ok``,
#: ``cached`` (the score of an earlier call with the same ``cache_key``, nothing paid) or ``error``.
_JUDGE_CALLS = """CREATE TABLE IF NOT EXISTS judge_calls (
    rollout_id TEXT NOT NULL REFERENCES rollouts (id),
    judge_index INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    score DOUBLE PRECISION,
    reason TEXT,
    error TEXT,
    attempts INTEGER NOT NULL,
    latency_s DOUBLE PRECISION,
    cache_key TEXT NOT NULL,
    request TEXT,
    response TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (rollout_id, judge_index)
)"""
_JUDGE_CACHE_INDEX = "CREATE INDEX IF NOT EXISTS judge_calls_by_cache ON judge_calls (cache_key, created_at)"

#: Production mode (``harnessrl/production/``, docs/production.md). A deployment is an application served
#: by the gateway; its recorded sessions are rollouts of the deployment's own run (``run_id``), so export,
#: inspection and training read them as they read any rollout. Keys are stored as SHA-256 hashes only.
_DEPLOYMENTS = """CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    config TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)"""
_APP_KEYS = """CREATE TABLE IF NOT EXISTS app_keys (
    id TEXT PRIMARY KEY,
    deployment TEXT NOT NULL REFERENCES deployments (name),
    key_hash TEXT NOT NULL UNIQUE,
    label TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
)"""
#: One conversation of a deployed application. ``id`` is the application's session id (header or path) or
#: a conversation-prefix digest; ``rollout_id`` is set only when the session is recorded (sampled
#: recording); ``arm`` (``stable`` | ``canary``) and ``policy_version`` say what served it. When its feedback
#: window closes, ``outcome`` holds the combined feedback and ``outcome_status`` how it was decided
#: (``open`` -> ``scored`` | ``defaulted`` | ``dropped``); ``trained_version`` is the version whose update used it.
_SESSIONS = """CREATE TABLE IF NOT EXISTS sessions (
    deployment TEXT NOT NULL REFERENCES deployments (name),
    id TEXT NOT NULL,
    rollout_id TEXT REFERENCES rollouts (id),
    key_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    recorded INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    last_call_at DOUBLE PRECISION NOT NULL,
    feedback_closes_at DOUBLE PRECISION NOT NULL,
    outcome DOUBLE PRECISION,
    outcome_status TEXT NOT NULL,
    trained_version INTEGER,
    PRIMARY KEY (deployment, id)
)"""
_SESSIONS_BY_WINDOW = ("CREATE INDEX IF NOT EXISTS sessions_by_window ON sessions"
                       " (deployment, outcome_status, feedback_closes_at)")
_FEEDBACK = """CREATE TABLE IF NOT EXISTS feedback (
    deployment TEXT NOT NULL,
    session_id TEXT NOT NULL,
    feedback_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (deployment, session_id, feedback_index),
    FOREIGN KEY (deployment, session_id) REFERENCES sessions (deployment, id)
)"""
#: Every decision about which version serves which fraction of a deployment's sessions: ``start`` (a
#: candidate begins serving ``fraction``), ``promote``, ``rollback``, ``hold`` (evaluated, not yet decided);
#: ``stats`` is the evidence (sessions and mean outcome per arm) as JSON.
_CANARY_DECISIONS = """CREATE TABLE IF NOT EXISTS canary_decisions (
    deployment TEXT NOT NULL REFERENCES deployments (name),
    decision_index INTEGER NOT NULL,
    action TEXT NOT NULL,
    stable_version INTEGER NOT NULL,
    candidate_version INTEGER,
    fraction DOUBLE PRECISION NOT NULL,
    stats TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (deployment, decision_index)
)"""
_PRODUCTION = [_DEPLOYMENTS, _APP_KEYS, _SESSIONS, _SESSIONS_BY_WINDOW, _FEEDBACK, _CANARY_DECISIONS]

MIGRATIONS: dict[int, list[str]] = {
    1: [_TASK_INDEX],  # the dashboard filters a run's rollouts by task
    2: [  # retention: a run's end, and what was purged
        "ALTER TABLE runs ADD COLUMN ended_at DOUBLE PRECISION",
        "ALTER TABLE rollouts ADD COLUMN purged_at DOUBLE PRECISION",
        "ALTER TABLE calls ADD COLUMN purged_at DOUBLE PRECISION",
    ],
    3: [_JUDGE_CALLS, _JUDGE_CACHE_INDEX],  # judge calls of a rollout
    4: _PRODUCTION,  # production mode: deployments, app keys, sessions, feedback, canary
}

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
{judge_calls};
{judge_cache_index};
"""


def ddl(dialect: Dialect) -> list[str]:
    """The CREATE statements for ``dialect``, one per list item (idempotent: IF NOT EXISTS)."""
    blob = {"sqlite": "BLOB", "postgresql": "BYTEA"}[dialect]
    text = _TABLES.replace("{blob}", blob).replace("{task_index}", _TASK_INDEX)
    text = text.replace("{judge_calls}", _JUDGE_CALLS).replace("{judge_cache_index}", _JUDGE_CACHE_INDEX)
    return [stmt.strip() for stmt in text.split(";") if stmt.strip()] + list(_PRODUCTION)
