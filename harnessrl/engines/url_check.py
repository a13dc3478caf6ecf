"""Check an engine's base URL at start: the one with its OpenAI routes (``.../v1``), not the server's root.

Given ``http://127.0.0.1:8000`` for a vLLM server, the gateway used to start without a word and then answer
every call with the engine's 404. ``check_engine_url`` asks ``GET {url}/models`` and the same with ``/v1``
added (or removed): when only the other one answers, that one is used and a WARNING says so; when the
server answers neither, starting is refused with both URLs and what they answered.

An engine that does not answer at all (not started yet, still loading: connection refused, a timeout, a
5xx) is left as given: the gateway's health checks wait for it, as they always did, and an engine that
harnessrl launches after the gateway starts is never probed here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import httpx

log = logging.getLogger(__name__)

#: Seconds each probe waits: a server that is up answers a models listing at once.
TIMEOUT_S = 3.0


class EngineURLError(ValueError):
    """An engine answers, but not at the base URL given nor at the same URL with or without ``/v1``."""


class _Route(Enum):
    SERVED = "served"  # the models route answered (200 with a model list, or 401/403: it exists, needs a key)
    MISSING = "missing"  # the server answered, but has no models route here (404, 405, not a model list)
    UNKNOWN = "unknown"  # no answer to judge by: down, starting (5xx), timed out


@dataclass(frozen=True, slots=True)
class _Probe:
    url: str
    route: _Route
    said: str  # what the server answered, for messages


def alternative(url: str) -> str:
    """The same base with ``/v1`` removed when it ends in it, added otherwise (a full endpoint such as
    ``.../v1/chat/completions`` gives its ``.../v1``)."""
    url = url.rstrip("/")
    head, sep, _ = url.partition("/v1/")
    if sep:
        return head + "/v1"
    return url[: -len("/v1")] if url.endswith("/v1") else url + "/v1"


def _probe(client: httpx.Client, base: str) -> _Probe:
    target = f"{base}/models"
    try:
        r = client.get(target)
    except httpx.HTTPError as exc:
        return _Probe(base, _Route.UNKNOWN, f"no answer ({type(exc).__name__})")
    said = f"HTTP {r.status_code}"
    if r.status_code in (401, 403):
        return _Probe(base, _Route.SERVED, said)
    if r.status_code >= 500:
        return _Probe(base, _Route.UNKNOWN, said)
    if r.status_code != 200:
        return _Probe(base, _Route.MISSING, said)
    try:
        listed = isinstance(r.json().get("data"), list)
    except (ValueError, AttributeError):
        listed = False
    return _Probe(base, _Route.SERVED if listed else _Route.MISSING, said if listed else f"{said}, not a model list")


def check_engine_url(url: str, timeout_s: float = TIMEOUT_S) -> str:
    """The base URL to use for ``url``'s engine (``url`` itself unless only its alternative serves models).

    Raises ``EngineURLError`` when the server answers at both and serves models at neither.
    """
    given = url.rstrip("/")
    other = alternative(given)
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        first = _probe(client, given)
        if first.route is not _Route.MISSING:
            if first.route is _Route.UNKNOWN:
                log.info("engine %s: GET %s/models: %s; the gateway waits for it", given, given, first.said)
            return given
        second = _probe(client, other)
    if second.route is _Route.SERVED:
        log.warning("engine %s: GET %s/models answered %s, GET %s/models answered %s: using %s (pass it as the "
                    "engine URL to silence this)", given, given, first.said, other, second.said, other)
        return other
    if second.route is _Route.MISSING:
        raise EngineURLError(
            f"engine {given} serves no OpenAI models route: GET {given}/models answered {first.said} and "
            f"GET {other}/models answered {second.said}. Pass the base URL its OpenAI routes are under "
            "(vLLM, SGLang: http://HOST:PORT/v1)")
    log.warning("engine %s: GET %s/models answered %s and %s did not answer (%s): keeping %s", given, given,
                first.said, other, second.said, given)
    return given


def check_engine_urls(urls: Sequence[str], timeout_s: float = TIMEOUT_S) -> list[str]:
    """``check_engine_url`` for each of ``urls``; ``embedded`` (started later by the caller) is kept as is."""
    return [u if u == "embedded" else check_engine_url(u, timeout_s) for u in urls]


def check_engine_urls_or_exit(urls: Sequence[str], timeout_s: float = TIMEOUT_S) -> list[str]:
    """``check_engine_urls`` for a command line: a refusal exits with its message, not a traceback."""
    try:
        return check_engine_urls(urls, timeout_s)
    except EngineURLError as exc:
        raise SystemExit(f"harnessrl: {exc}") from None
