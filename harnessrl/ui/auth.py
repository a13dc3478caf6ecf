"""The dashboard's door: a token, once, then an expiring, revocable session.

Two tokens: the operator's (the gateway's admin token, which also opens the admin API) and, optionally,
a viewer's, which opens the dashboard only. A browser arrives with ``?token=...`` (or posts it on the
login page); the answer is a cookie holding a random session id (never the token) and a redirect to the
same address without the token, so it stays out of history, referrers and any log. Sessions live in this
process: each expires after ``session_ttl_s``, ``/logout`` ends one, an operator's
``POST /sessions/revoke`` ends every session, and a restart ends them all. API clients may send
``Authorization: Bearer <token>`` instead. Static assets (CSS, JS) carry no data and need no token.

The session's role (``operator`` or ``viewer``) is in ``request.state.harnessrl_role`` for the pages.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

COOKIE = "harnessrl_ui"
OPERATOR, VIEWER = "operator", "viewer"
#: Default session lifetime: a working day.
SESSION_TTL_S = 12 * 3600.0


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _safe_next(target: str, root: str) -> str:
    """Only same-site paths under the dashboard: no open redirect via ``next``."""
    if target.startswith((root + "/") if root else "/") and not target.startswith("//") and "\\" not in target:
        return target
    return root + "/"


@dataclass(slots=True)
class Session:
    role: str
    expires: float


class Sessions:
    """Server-side sessions: the cookie holds a random id, this table only its hash, a role and an expiry."""

    def __init__(self, ttl_s: float = SESSION_TTL_S, clock: Any = time.time) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._by_digest: dict[str, Session] = {}

    def open(self, role: str) -> str:
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            self._by_digest = {d: s for d, s in self._by_digest.items() if s.expires > now}  # prune
            self._by_digest[_digest(session_id)] = Session(role, now + self.ttl_s)
        return session_id

    def role(self, session_id: str) -> str | None:
        """The session's role, or None when it is unknown, expired or revoked."""
        if not session_id:
            return None
        with self._lock:
            session = self._by_digest.get(_digest(session_id))
            if session is None:
                return None
            if session.expires <= self._clock():
                del self._by_digest[_digest(session_id)]
                return None
            return session.role

    def revoke(self, session_id: str) -> bool:
        with self._lock:
            return self._by_digest.pop(_digest(session_id), None) is not None

    def revoke_all(self) -> int:
        with self._lock:
            count = len(self._by_digest)
            self._by_digest.clear()
            return count

    def __len__(self) -> int:
        return len(self._by_digest)


class TokenGate:
    """ASGI middleware: lets a request through with a valid session, or a token (then opens a session)."""

    def __init__(self, app: Any, token: str, *, viewer_token: str | None = None,
                 session_ttl_s: float = SESSION_TTL_S) -> None:
        if viewer_token is not None and hmac.compare_digest(viewer_token.encode(), token.encode()):
            raise ValueError("the viewer token must differ from the operator token")
        self.app = app
        self._tokens = [(token, OPERATOR), *([(viewer_token, VIEWER)] if viewer_token else [])]
        self.sessions = Sessions(session_ttl_s)

    def _role_of_token(self, given: str) -> str | None:
        found = None
        for token, role in self._tokens:  # compare with every token: no timing hint of which matched
            if hmac.compare_digest(given.encode(), token.encode()):
                found = role
        return found

    def _role(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return self._role_of_token(auth[7:].strip())
        return self.sessions.role(request.cookies.get(COOKIE, ""))

    def _login_response(self, root: str, target: str, role: str) -> Response:
        resp = RedirectResponse(_safe_next(target, root), status_code=303)
        resp.set_cookie(COOKIE, self.sessions.open(role), httponly=True, samesite="strict", path=root or "/",
                        max_age=int(self.sessions.ttl_s))
        return resp

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: C901 - one door
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        root = scope.get("root_path", "")
        path = scope["path"]
        local = path[len(root):] if path.startswith(root) else path
        if local.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            role = self._role_of_token(query.pop("token"))
            if role is not None:
                target = path + ("?" + urlencode(query) if query else "")
                await self._login_response(root, target, role)(scope, receive, send)
                return
        elif local == "/login" and request.method == "POST":
            form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
            role = self._role_of_token(form.get("token", ""))
            if role is not None:
                await self._login_response(root, form.get("next", root + "/"), role)(scope, receive, send)
                return
            scope = {**scope, "method": "GET", "query_string": urlencode(
                {"failed": "1", "next": form.get("next", "")}).encode()}
        elif local == "/logout":
            self.sessions.revoke(request.cookies.get(COOKIE, ""))
            resp = RedirectResponse(f"{root}/login", status_code=303)
            resp.delete_cookie(COOKIE, path=root or "/")
            await resp(scope, receive, send)
            return
        role = self._role(request)
        if local == "/sessions/revoke" and request.method == "POST":
            if role != OPERATOR:
                await JSONResponse({"error": {"message": "only an operator can revoke sessions",
                                              "type": "permission_error"}}, 403)(scope, receive, send)
                return
            await JSONResponse({"revoked": self.sessions.revoke_all()})(scope, receive, send)
            return
        if local == "/login" or role is not None:
            scope.setdefault("state", {})["harnessrl_role"] = role
            await self.app(scope, receive, send)
            return
        nxt = path + ("?" + urlencode(query) if query else "")
        await RedirectResponse(f"{root}/login?{urlencode({'next': nxt})}", status_code=303)(scope, receive, send)
