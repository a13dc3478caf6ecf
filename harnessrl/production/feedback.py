"""``POST /p/{deployment}/feedback``: an application's delayed signal about one of its sessions.

Body ``{"session_id": str, "name": str, "value": number}``. Accepted while the session's window is open
(``[production.feedback] window_s`` after its last call, ``store/feedback.py``); the signals are combined
into the session's outcome when the window closes (``windows.py``, ``combine.py``). Errors, in the
OpenAI shape: 400 (body, name, value, session id; a name outside ``weights`` when weights are set),
404 (unknown session), 410 (window closed). The gateway mounts this handler behind the deployment's
app-key auth (the deployment is known and the key may use it before this runs).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from harnessrl.gateway.admin import json_response
from harnessrl.gateway.errors import BadRequest, GatewayError, NotFoundError
from harnessrl.gateway.http import read_json
from harnessrl.production.config import FeedbackConfig
from harnessrl.store.base import NotFound, Store
from harnessrl.store.feedback import FeedbackWindowClosed

#: A feedback body is three small fields; anything larger is not feedback.
MAX_BODY_BYTES = 16 * 1024
#: The session id rule of the production routes (header, path or digest).
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
#: A signal's name: what kind of feedback it is (``thumbs``, ``resolved_ticket``, ``conversion``).
FEEDBACK_NAME = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class FeedbackClosedError(GatewayError):
    """The session's window closed: 410, so that clients do not retry."""

    status, code = 410, "feedback_window_closed"


@dataclass(frozen=True, slots=True)
class FeedbackPost:
    session_id: str
    name: str
    value: float


def parse_feedback(body: Any, config: FeedbackConfig) -> FeedbackPost:
    """Validate a feedback body (``BadRequest`` with what to send instead)."""
    if not isinstance(body, dict):
        raise BadRequest('the feedback body must be a JSON object: {"session_id": "...", "name": "thumbs", '
                         '"value": 1}')
    unknown = sorted(set(body) - {"session_id", "name", "value"})
    if unknown:
        raise BadRequest(f"unknown feedback fields {unknown}; send session_id, name and value")
    sid, name, value = body.get("session_id"), body.get("name"), body.get("value")
    if not isinstance(sid, str) or not SESSION_ID.match(sid):
        raise BadRequest("'session_id' must be the session's id (1-128 characters of letters, digits, '.', "
                         "'_', ':', '-'), as the gateway returned it in the X-Session-Id response header")
    if not isinstance(name, str) or not FEEDBACK_NAME.match(name):
        raise BadRequest("'name' must say what kind of feedback this is: 1-64 characters of letters, digits, "
                         "'.', '_', ':', '-' (e.g. 'thumbs', 'resolved', 'conversion')")
    if config.weights and name not in config.weights:
        raise BadRequest(f"feedback name {name!r} is not one of the configured signals "
                         f"{sorted(config.weights)} ([production.feedback] weights)")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest("'value' must be a finite number (e.g. 1 for thumbs up, 0 for thumbs down)")
    return FeedbackPost(sid, name, float(value))


async def post_feedback(request: Request, store: Store, deployment: str, config: FeedbackConfig) -> Response:
    """Record one signal: 201 ``{"session_id", "name", "value", "index"}``, else an OpenAI-shaped error."""
    try:
        post = parse_feedback(await read_json(request, MAX_BODY_BYTES), config)
        try:
            row = await asyncio.to_thread(store.add_feedback, deployment, post.session_id, post.name, post.value)
        except NotFound:
            raise NotFoundError(f"deployment {deployment!r} has no session {post.session_id!r}; send the id "
                                "from the X-Session-Id header of one of its responses",
                                code="session_not_found") from None
        except FeedbackWindowClosed as exc:
            closed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exc.closes_at))
            raise FeedbackClosedError(
                f"the feedback window of session {post.session_id!r} closed at {closed}; feedback is accepted "
                f"for window_s = {config.window_s:g} s ([production.feedback]) after a session's last call"
            ) from None
    except GatewayError as exc:
        return exc.response()
    return json_response({"session_id": row.session_id, "name": row.name, "value": row.value,
                          "index": row.index}, 201)
