"""What a store mixin (judge calls, deployments, feedback, canary) uses of ``SqlStore`` and its driver.

Declared for type checkers only: a stub defined at run time would shadow the real method, which comes later
in the drivers' method resolution order (``class SqliteStore(JudgeCallsMixin, ..., SqlStore)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessrl.store.rows import RowLike


class SqlMixin:
    P: str  # the driver's parameter mark
    LOCK_ROWS: str  # " FOR UPDATE" where the driver locks selected rows
    if TYPE_CHECKING:
        def _write(self) -> AbstractContextManager[Any]: ...
        def _read(self) -> AbstractContextManager[Any]: ...
        def _text(self, value: str | None) -> str | None: ...
        def _one(self, conn: Any, sql: str, args: Sequence[Any], what: str) -> RowLike: ...
        def _next_created(self) -> float: ...
