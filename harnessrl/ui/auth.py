"""The dashboard's door when the gateway serves it: the admin token, once, then a cookie.

A browser arrives with ``?token=...`` (or posts it on the login page); the gateway answers with a
cookie holding an HMAC of the token (never the token itself) and redirects to the same address
without the token, so it stays out of history, referrers and any log. API clients may send
``Authorization: Bearer <token>`` instead. Static assets (CSS, JS) carry no data and need no token.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

COOKIE = "harnessrl_ui"


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"harnessrl-dashboard-session", hashlib.sha256).hexdigest()


def _safe_next(target: str, root: str) -> str:
    """Only same-site paths under the dashboard: no open redirect via ``next``."""
    if target.startswith((root + "/") if root else "/") and not target.startswith("//") and "\\" not in target:
        return target
    return root + "/"


class TokenGate:
    """ASGI middleware: lets a request through when it proves knowledge of ``token``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token
        self._cookie = cookie_value(token)

    def _authorized(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and hmac.compare_digest(auth[7:].strip().encode(), self.token.encode()):
            return True
        return hmac.compare_digest(request.cookies.get(COOKIE, "").encode(), self._cookie.encode())

    def _login_response(self, root: str, target: str) -> Response:
        resp = RedirectResponse(_safe_next(target, root), status_code=303)
        resp.set_cookie(COOKIE, self._cookie, httponly=True, samesite="strict", path=root or "/")
        return resp

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
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
            given = query.pop("token")
            if hmac.compare_digest(given.encode(), self.token.encode()):
                target = path + ("?" + urlencode(query) if query else "")
                await self._login_response(root, target)(scope, receive, send)
                return
        elif local == "/login" and request.method == "POST":
            form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
            if hmac.compare_digest(form.get("token", "").encode(), self.token.encode()):
                await self._login_response(root, form.get("next", root + "/"))(scope, receive, send)
                return
            scope = {**scope, "method": "GET", "query_string": urlencode(
                {"failed": "1", "next": form.get("next", "")}).encode()}
        if local == "/login" or self._authorized(request):
            await self.app(scope, receive, send)
            return
        nxt = path + ("?" + urlencode(query) if query else "")
        await RedirectResponse(f"{root}/login?{urlencode({'next': nxt})}", status_code=303)(scope, receive, send)
