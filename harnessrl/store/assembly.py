"""The stores ``open_store`` opens: a core driver extended by the feature stores.

The core record (runs, tasks, rollouts, calls, rewards, policy versions, retention: ``base.py``,
``sql.py``, ``sqlite.py``, ``postgres.py``, ``schema.py``) imports no feature. A feature keeps its tables
and methods in its own module, mixed in here before the driver: the judges' calls (``judge_calls.py``)
and production mode's deployments, app keys and sessions (``deployments.py``), feedback windows
(``feedback.py``) and canary decisions (``canary.py``). Each feature's tables are created with the core
ones in a new database and by the migration step that first added them to an older one, so a database
written before this split opens unchanged.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from harnessrl.store.canary import CanaryMixin
from harnessrl.store.deployments import DeploymentsMixin
from harnessrl.store.feedback import FeedbackMixin
from harnessrl.store.judge_calls import JudgeCallsMixin
from harnessrl.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from harnessrl.store.postgres import PostgresStore

#: The feature stores' tables, in creation order (a table's references are created before it).
FEATURES = (JudgeCallsMixin.FEATURE, DeploymentsMixin.FEATURE, FeedbackMixin.FEATURE, CanaryMixin.FEATURE)


class FullSqliteStore(CanaryMixin, DeploymentsMixin, FeedbackMixin, JudgeCallsMixin, SqliteStore):
    """``SqliteStore`` with every feature store."""

    FEATURES = FEATURES


@cache
def full_postgres_store() -> type[PostgresStore]:
    """``PostgresStore`` with every feature store (a function: psycopg is imported only when it is used)."""
    from harnessrl.store.postgres import PostgresStore

    class FullPostgresStore(CanaryMixin, DeploymentsMixin, FeedbackMixin, JudgeCallsMixin, PostgresStore):
        """``PostgresStore`` with every feature store."""

        FEATURES = FEATURES

    return FullPostgresStore
