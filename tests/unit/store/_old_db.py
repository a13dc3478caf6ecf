"""A database as harnessrl left it at schema version 2 (before retention): tables and rows, no store code.

The rows are what version 2 wrote: ``encode_call``'s row without the ``purged_at`` column it gained later
(the codec itself did not change), so a three-turn chain is stored prefix-compressed as before.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from harnessrl.store.rows import CALL_COLUMNS, RolloutSeqs, encode_call

from . import schema_v2
from ._helpers import make_call

V2_CALL_COLUMNS = CALL_COLUMNS[: CALL_COLUMNS.index("purged_at")]
PROMPTS = ([1, 2, 3], [1, 2, 3, 100, 101, 50], [1, 2, 3, 100, 101, 50, 102, 103, 51])


def fill_v2(conn: Any, dialect: schema_v2.Dialect) -> tuple[str, str]:
    """Create the version-2 tables on ``conn`` and one ended-looking run with a finished 3-call rollout."""
    p = "?" if dialect == "sqlite" else "%s"
    for stmt in schema_v2.ddl(dialect):
        conn.execute(stmt)
    now = time.time() - 3600
    conn.execute(f"INSERT INTO schema_version (version) VALUES ({p})", (2,))
    conn.execute(f"INSERT INTO runs (id, name, config, created_at) VALUES ({p}, {p}, {p}, {p})",
                 ("old-run", "old", "{}", now))  # fmt: skip
    conn.execute(
        "INSERT INTO rollouts (id, run_id, task_id, group_id, input, api_key_hash, status, policy_version, "
        f"created_at, started_at, finished_at, metadata, logs) VALUES ({', '.join([p] * 13)})",
        ("old-rollout", "old-run", "t", "g", orjson.dumps({"q": 1}).decode(), "h", "succeeded", 0, now, now,
         now + 1, "{}", "old logs"),
    )  # fmt: skip
    seqs = RolloutSeqs()
    marks = ", ".join([p] * len(V2_CALL_COLUMNS))
    for i, prompt in enumerate(PROMPTS):
        row = encode_call(make_call("old-rollout", prompt, [100 + 2 * i, 101 + 2 * i]), seqs, now)
        conn.execute(
            f"INSERT INTO calls ({', '.join(V2_CALL_COLUMNS)}) VALUES ({marks})", row[: len(V2_CALL_COLUMNS)]
        )
    return "old-run", "old-rollout"
