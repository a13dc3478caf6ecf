"""The admin API of production mode (admin token): deployments, their app keys, their sessions.

A key appears once, in the answer that creates it; listings show ids, labels and times, never a key or
its hash. Revoking takes effect at once on this gateway (``AppKeyAuth.forget``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harnessrl.gateway.admin import json_response
from harnessrl.gateway.errors import BadRequest
from harnessrl.gateway.http import read_json
from harnessrl.gateway.rollout_registry import hash_key
from harnessrl.production.keys import new_app_key

if TYPE_CHECKING:
    from harnessrl.production.arms import ArmPlan
    from harnessrl.production.deployments import Deployments
    from harnessrl.production.keys import AppKeyAuth
    from harnessrl.production.sessions import SessionTable
    from harnessrl.store.base import Store
    from harnessrl.store.deployments import Deployment

MAX_LABEL = 200
#: Puts an admin handler behind the admin token check (``PluginHost.admin_route``).
AdminRoute = Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]]


class DeploymentLookup(Protocol):
    """What the canary's admin routes need of the production API: a deployment by name, else 404."""

    async def deployment_or_404(self, name: str) -> Deployment: ...


class ProductionView(DeploymentLookup, Protocol):
    """What the deployment admin routes read of the production API (``routes.ProductionApi``), named here so
    the routes it mounts need not import the module that mounts them."""

    store: Store
    deployments: Deployments
    keys: AppKeyAuth
    arms: ArmPlan
    sessions: SessionTable

    def deployment_json(self, dep: Deployment, request: Request) -> dict[str, Any]: ...


class ProductionAdmin:
    def __init__(self, api: ProductionView, route: AdminRoute) -> None:
        self.api, self.route = api, route

    def routes(self) -> list[Route]:
        r = self.route
        return [
            Route("/admin/deployments", r(self.create_deployment), methods=["POST"]),
            Route("/admin/deployments", r(self.list_deployments), methods=["GET"]),
            Route("/admin/deployments/{deployment}", r(self.get_deployment), methods=["GET"]),
            Route("/admin/deployments/{deployment}/keys", r(self.create_key), methods=["POST"]),
            Route("/admin/deployments/{deployment}/keys", r(self.list_keys), methods=["GET"]),
            Route("/admin/deployments/{deployment}/keys/{key_id}", r(self.revoke_key), methods=["DELETE"]),
            Route("/admin/deployments/{deployment}/sessions", r(self.list_sessions), methods=["GET"]),
        ]

    async def create_deployment(self, request: Request) -> Response:
        body = await _body(request)
        name = body.pop("name", None)
        dep = await self.api.deployments.create(name, body)
        return json_response(self.api.deployment_json(dep, request), 201)

    async def list_deployments(self, request: Request) -> Response:
        deps = await asyncio.to_thread(self.api.store.list_deployments)
        return json_response({"data": [self.api.deployment_json(d, request) for d in deps]})

    async def get_deployment(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        return json_response(self.api.deployment_json(dep, request))

    async def create_key(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        body = await _body(request)
        label = body.get("label", "")
        if not isinstance(label, str) or len(label) > MAX_LABEL:
            raise BadRequest(f"'label' must be a string of at most {MAX_LABEL} characters (what the key is for)")
        key = new_app_key()
        row = await asyncio.to_thread(self.api.store.add_app_key, dep.name, hash_key(key), label)
        out = {**asdict(row), "api_key": key, **self.api.deployment_json(dep, request)}
        out["deployment"] = out.pop("name")
        return json_response(out, 201)

    async def list_keys(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        keys = await asyncio.to_thread(self.api.store.list_app_keys, dep.name)
        return json_response({"data": [asdict(k) for k in keys]})

    async def revoke_key(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        key_id = request.path_params["key_id"]
        row = await asyncio.to_thread(self.api.store.revoke_app_key, dep.name, key_id)  # NotFound: 404
        self.api.keys.forget(key_id)
        return json_response(asdict(row))

    async def list_sessions(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        q = request.query_params
        try:
            limit, offset = min(int(q.get("limit", 100)), 1000), int(q.get("offset", 0))
            recorded = {"true": True, "false": False}[q["recorded"]] if "recorded" in q else None
        except (ValueError, KeyError):
            raise BadRequest("bad query parameter: limit and offset are integers, recorded is true or false") \
                from None
        await self.api.sessions.flush()  # counts of the calls just answered
        rows = await asyncio.to_thread(self.api.store.list_sessions, dep.name, recorded=recorded, limit=limit + 1,
                                       offset=offset)
        return json_response({"data": [asdict(s) for s in rows[:limit]], "limit": limit, "offset": offset,
                              "has_more": len(rows) > limit})


async def _body(request: Request) -> dict[str, Any]:
    body = await read_json(request, 64 * 1024) if int(request.headers.get("content-length") or 0) else {}
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body
