"""The model-call routes dispatched straight to the call handler, in front of Starlette's middleware and router.

Every sampled call of every rollout takes one of a few fixed paths (``/r/<rollout>/v1/chat/completions``, the
same without ``v1/``, ...).
Through Starlette it passed two middlewares, each wrapping ``send``, and a router testing the path against
every route's regex in turn: 5% of the gateway's Python samples at concurrency 1 (py-spy), half of which this
lane takes away (the ``Request`` and ``Response`` objects stay). It matches those paths with string operations
and calls the same handlers with the same ``Request``; anything else (admin, rewards, model lists, dashboards,
plug-ins, a wrong method or path) goes to the Starlette app as before, so its 404/405 answers and routing are
unchanged. An exception raised here reaches uvicorn, which answers 500 when nothing was sent yet and logs it,
as Starlette's error middleware did. Starlette's routes for these paths are built from the same table
(``routes``): they answer what the lane passes on there (a wrong method, a request under a ``root_path``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.routing import Route

from harnessrl.types import ApiKind


class Handle(Protocol):
    """A harness route's handler: the call handler's ``handle`` for one API (returns an ASGI response)."""

    def __call__(self, request: Request, api: ApiKind) -> Awaitable[Any]: ...

#: The APIs' own paths under a base URL that ends in ``/v1``.
_CALLS: dict[str, ApiKind] = {
    "chat/completions": ApiKind.CHAT,
    "completions": ApiKind.COMPLETIONS,
    "messages": ApiKind.ANTHROPIC_MESSAGES,
    "responses": ApiKind.RESPONSES,
}
#: The path after ``/r/<rollout>/`` of each model-call route (POST only), and its API: each under ``v1/``
#: (clients that append ``/v1/...`` to the rollout's URL, or are handed ``.../v1``) and without it (clients
#: handed the rollout's URL that append only ``/messages``, as the Vercel AI SDK's Anthropic provider does).
PATHS: dict[str, ApiKind] = {**{f"v1/{p}": api for p, api in _CALLS.items()}, **_CALLS}
#: Gemini's ``<version>/models/<model>:<action>`` paths served as calls; the last, with no version, for a
#: client handed a base URL that already names one (the Vercel AI SDK's Google provider appends ``/models``).
GEMINI_VERSIONS = ("v1beta/models/", "v1/models/", "models/")
GEMINI_ACTIONS = (":generateContent", ":streamGenerateContent")


def match(path: str) -> tuple[ApiKind, dict[str, str]] | None:
    """The API and path parameters of a model-call path, or None (what Starlette's routes would match:
    ``{rollout}`` and ``{model}`` are one non-empty path segment each)."""
    if not path.startswith("/r/"):
        return None
    rollout, _, rest = path[3:].partition("/")
    if not rollout:
        return None
    api = PATHS.get(rest)
    if api is not None:
        return api, {"rollout": rollout}
    for version in GEMINI_VERSIONS:
        if rest.startswith(version):
            model = rest[len(version):]
            for action in GEMINI_ACTIONS:
                if model.endswith(action):
                    model = model[: -len(action)]
                    if model and "/" not in model:
                        return ApiKind.GEMINI, {"rollout": rollout, "model": model}
            return None
    return None


def routes(handle: Handle) -> list[Route]:
    """The lane's paths as Starlette routes, POST only, each calling ``handle`` with its API: Starlette
    answers a wrong method on them (405, in the API's error shape) and serves them under a ``root_path``, so
    the two cannot disagree on what a model call is. Gemini's actions before any route matching a bare model."""
    found = [Route(f"/r/{{rollout}}/{rest}", functools.partial(handle, api=api), methods=["POST"])
             for rest, api in PATHS.items()]
    for version in GEMINI_VERSIONS:
        found += [Route(f"/r/{{rollout}}/{version}{{model}}{action}", functools.partial(handle, api=ApiKind.GEMINI),
                        methods=["POST"]) for action in GEMINI_ACTIONS]
    return found


class CallLane:
    """An ASGI app: POSTs to a model-call path go to ``handle``; all else to ``app``."""

    def __init__(self, app: Any, handle: Handle) -> None:
        self.app, self.handle = app, handle

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            found = match(scope["path"])
            if found is not None:
                scope["path_params"] = found[1]
                response = await self.handle(Request(scope, receive), found[0])
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
