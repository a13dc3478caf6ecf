"""Durable recording with group commit.

A request's response is released only after its call is committed, so a crash never loses a call whose
answer a harness saw. The calls that finish in one turn of the event loop are committed together, in one
store transaction: on the loop itself when none of them has a secret to redact and the store can commit
without waiting (``Store.record_calls_nowait``: SQLite with its lock free, no other writer, no fsync in the
commit), else by one writer thread that redacts, commits everything queued so far (``Store.record_calls``)
and then wakes the waiting coroutines. Committing on the loop spares a call two thread hand-offs (~15% of its
CPU at concurrency 1); the thread keeps what can take long (decoding a call's tokens to redact a key, a busy
lock, a checkpoint, a network database) off the loop.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import OrderedDict, defaultdict
from typing import Any, Literal

from harnessrl.gateway.errors import StoreUnavailable
from harnessrl.redaction.text import Redactor
from harnessrl.redaction.tokens import TokenRedactor, without_fields
from harnessrl.store.base import NewCall, Store, StoreError

log = logging.getLogger(__name__)

#: Rollouts whose found secrets are remembered (the most recent), and secrets kept per rollout.
KNOWN_ROLLOUTS = 4096
KNOWN_PER_ROLLOUT = 16
KNOWN_MAX_CHARS = 128
_Item = tuple[NewCall, asyncio.AbstractEventLoop | None, asyncio.Future | None]
#: Where calls are committed: "auto" (on the loop when the store can without waiting, else the writer
#: thread), "thread" (always the writer thread), "loop" (always on the loop, waiting if it must).
RecordOn = Literal["auto", "thread", "loop"]
#: Fields of a response (top level and each choice) that hold token IDs and nothing else. The search for
#: secrets in a call's text leaves them out: digits hold no text (the token redactor finds a secret's tokens
#: by decoding them), and with a long prompt their JSON was most of what the search read -- ~30% of the
#: gateway's CPU per call at 16,000 prompt tokens when the client asked for them (docs/measurements.md).
ID_FIELDS = frozenset({"prompt_token_ids", "token_ids"})


class RecorderClosed(RuntimeError):
    """The recorder was stopped; nothing more can be recorded."""


class Recorder:
    def __init__(self, store: Store, redactor: Redactor, batch_max: int = 256, on: RecordOn = "auto",
                 tokens: TokenRedactor | None = None) -> None:
        if on == "auto" and getattr(type(store), "record_calls_nowait", None) is Store.record_calls_nowait:
            on = "thread"  # this store never commits without waiting (e.g. PostgreSQL): straight to the thread
        self._on = on
        self._mutex = threading.Lock()  # held while a batch is redacted and committed (loop or thread)
        self._tokens = tokens
        self._known: OrderedDict[str, set[str]] = OrderedDict()  # rollout -> secrets found in its calls
        self._pending: list[_Item] = []
        self._pending_loop: asyncio.AbstractEventLoop | None = None  # the loop whose turn flushes _pending
        self._store = store
        self._redact = redactor
        self._batch_max = batch_max
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="harnessrl-recorder", daemon=True)
        self._closed = False
        self.batches = 0  # observable group-commit statistics
        self.batches_on_loop = 0  # of which committed on the event loop
        self.recorded = 0

    def start(self) -> None:
        if self._on != "loop":
            self._thread.start()

    async def record(self, call: NewCall) -> int:
        """Commit ``call`` durably and return its index in the rollout (raises the store's error)."""
        if self._closed:
            raise RecorderClosed("the gateway is shutting down")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._enqueue((call, loop, fut), loop)
        # Not shielded: a waiter cancelled (its client gone) cancels only ``fut``, whose outcome is then
        # dropped (``_resolve_all``); the call itself is committed all the same.
        return await fut

    def record_nowait(self, call: NewCall) -> None:
        """Queue ``call`` without waiting (used when the client is already gone)."""
        if self._closed:
            return
        self._enqueue((call, None, None), None if self._on == "thread" else asyncio.get_running_loop())

    def _enqueue(self, item: _Item, loop: asyncio.AbstractEventLoop | None) -> None:
        """Into this loop turn's batch; to the writer thread in "thread" mode, or when the batch waiting is
        another loop's (its futures may only be resolved on their own loop)."""
        if self._on == "thread" or (self._on == "auto" and self._pending and self._pending_loop is not loop):
            self._queue.put(item)
            return
        assert loop is not None
        if not self._pending:
            self._pending_loop = loop
            loop.call_soon(self._flush_inline)
        self._pending.append(item)

    def _flush_inline(self) -> None:
        """Commit the calls of this loop turn here if the store can without waiting, else hand them over."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        if self._on == "loop":
            with self._mutex:
                self._commit(batch, resolve_now=True)
            return
        if self._closed or not self._mutex.acquire(blocking=False):  # the writer thread is at work
            self._hand_over(batch)
            return
        outcomes: list[int] | None = None
        try:
            calls = [c for c, _, _ in batch]
            if not any(map(self._needs_redaction, calls)):  # a secret's redaction (decoding tokens) is the thread's
                try:
                    outcomes = self._store.record_calls_nowait(calls)
                except Exception:  # noqa: BLE001 - e.g. one call's rollout closed: the thread gives each its verdict
                    outcomes = None
            if outcomes is not None:
                self.batches += 1
                self.batches_on_loop += 1
                self.recorded += len(outcomes)
        finally:
            self._mutex.release()
        if outcomes is None:
            self._hand_over(batch)
        else:
            _resolve_all([(fut, o) for (_, _, fut), o in zip(batch, outcomes, strict=True) if fut is not None])

    def _hand_over(self, batch: list[_Item]) -> None:
        if self._thread.is_alive():
            for item in batch:
                self._queue.put(item)
        else:  # stopped meanwhile: commit here rather than drop a call
            with self._mutex:
                self._commit(batch, resolve_now=True)

    def stop(self) -> None:
        """Commit everything queued, then stop the writer thread."""
        if self._closed:
            return
        self._closed = True
        if self._pending:
            self._flush_inline()
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        self._thread.join(timeout=30)

    # -- writer thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < self._batch_max:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            with self._mutex:
                self._commit(batch)
            if stop:
                return

    def _commit(self, batch: list[_Item], resolve_now: bool = False) -> None:
        calls = [self._redacted(c) for c, _, _ in batch]
        outcomes: list[Any]
        try:
            outcomes = list(self._store.record_calls(calls))
            self.batches += 1
        except Exception:
            # One bad call (e.g. its rollout was closed meanwhile) must not fail its neighbours:
            # retry one by one so each request gets its own verdict.
            outcomes = []
            for call in calls:
                try:
                    outcomes.append(self._store.record_calls([call])[0])
                except StoreError as exc:  # the store's verdict on this call (e.g. rollout closed)
                    log.warning("recording a call of rollout %s failed: %s", call.rollout_id, exc)
                    outcomes.append(exc)
                except Exception as exc:  # noqa: BLE001 - the store itself failed: handed to the request
                    log.warning("recording a call of rollout %s failed: %s", call.rollout_id, exc)
                    outcomes.append(unavailable(exc))
        self.recorded += sum(1 for o in outcomes if not isinstance(o, BaseException))
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Any]]] = defaultdict(list)
        for (_, loop, fut), outcome in zip(batch, outcomes, strict=True):
            if loop is not None and fut is not None:
                by_loop[loop].append((fut, outcome))
        for loop, results in by_loop.items():
            if resolve_now:
                _resolve_all(results)
                continue
            try:
                loop.call_soon_threadsafe(_resolve_all, results)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _needs_redaction(self, call: NewCall) -> bool:
        """Whether ``_redacted`` would change anything: a secret in its text, one known in its rollout, or
        tokens whose text is not there to tell (its token scan can take 100 ms: never on the loop)."""
        if call.rollout_id in self._known or self._redact.findall(call.request, _text_of(call.response), call.error):
            return True
        return self._tokens is not None and self._tokens.needs_scan(call, False)

    def _redacted(self, call: NewCall) -> NewCall:
        """Secrets out of the text, then out of the token arrays (``redact_tokens``): a call whose text
        held one is stored with those tokens replaced and ``sampling["redacted"]`` saying where. Secrets
        found in a rollout are remembered (in memory) so that a later call holding only part of one --
        a key cut short -- is redacted too."""
        known = self._known.get(call.rollout_id)
        found = self._redact.findall(call.request, _text_of(call.response), call.error)
        if found:
            known = self._remember(call.rollout_id, found)
        redact, tokens = self._redact, self._tokens
        if known:
            redact = self._redact.with_known(known)
            if tokens is not None:
                tokens = tokens.with_known(redact.patterns)
        hit = False
        if found or known:  # else nothing matched: the text stays as it is
            before = (call.request, call.response, call.error)
            call.request = redact(call.request)
            if call.response is not None:
                call.response = redact(call.response)
            if call.error:
                call.error = redact(call.error)
            hit = any(a is not b for a, b in zip((call.request, call.response, call.error), before, strict=True))
        if tokens is not None and tokens.needs_scan(call, hit):
            marker = tokens.scrub(call)
            if marker is not None:
                call.sampling = {**call.sampling, "redacted": marker}
        return call

    def _remember(self, rollout_id: str, found: set[str]) -> set[str]:
        known = self._known.pop(rollout_id, set())
        found = {f for f in found if len(f) <= KNOWN_MAX_CHARS}  # keys; a PEM block is found by its pattern
        known |= set(sorted(found)[:KNOWN_PER_ROLLOUT - len(known)]) if len(known) < KNOWN_PER_ROLLOUT else set()
        self._known[rollout_id] = known  # most recent last
        while len(self._known) > KNOWN_ROLLOUTS:
            self._known.popitem(last=False)
        return known


def _text_of(response: dict[str, Any] | None) -> dict[str, Any] | None:
    """``response`` as the secret search reads it: without its token-ID arrays (``ID_FIELDS``)."""
    return without_fields(response, ID_FIELDS)


def record_on(setting: bool | str) -> RecordOn:
    """``[gateway] record_inline``: "auto", or true (always on the loop) / false (always the writer thread)."""
    if setting is True:
        return "loop"
    if setting is False:
        return "thread"
    if setting != "auto":
        raise ValueError(f"record_inline must be true, false or \"auto\", not {setting!r}")
    return "auto"


def unavailable(exc: Exception) -> StoreUnavailable:
    """A store failure (disk full, database unreachable) as the harness's 503, with the cause."""
    return StoreUnavailable(
        f"the call was not recorded, so it is not answered: the store refused the write ({type(exc).__name__}: "
        f"{exc}). Free disk space or bring the database back; the gateway records again by itself, retry "
        "the call.")


def _resolve_all(results: list[tuple[asyncio.Future, Any]]) -> None:
    for fut, outcome in results:
        if fut.done():
            continue
        if isinstance(outcome, BaseException):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)


def token_redactor(config: Any, renderer: Any = None) -> TokenRedactor | None:
    """The gateway's token redactor: the renderer's tokenizer (render_mode "gateway"), else the one
    ``[gateway.render] tokenizer`` names when set (the stack sets it to the engine's model), else none
    (token arrays of a call whose text held a secret are then dropped)."""
    patterns = list(config.redact_patterns)
    if not patterns:
        return None
    tokenizer = getattr(renderer, "tokenizer", None)
    if tokenizer is None and "tokenizer" in config.render.model_fields_set:
        spec = config.render.tokenizer
        try:
            from harnessrl.gateway.render.factory import load_tokenizer

            tokenizer = load_tokenizer(spec)
        except Exception as exc:  # noqa: BLE001 - no tokenizer: the safe fallback below
            log.warning("no tokenizer %r for redacting secrets in token IDs (%s): a call whose text holds a "
                        "secret is stored without its token arrays", spec, exc)
    if tokenizer is None:
        log.info("token redaction without a tokenizer: a call whose text holds a secret is stored without its "
                 "token arrays (set [gateway.render] tokenizer to the engine's model to keep them, redacted)")
    return TokenRedactor(patterns, tokenizer)
