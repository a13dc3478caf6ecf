"""The canary's admin routes (admin token): which version serves which share of a deployment, the
decisions with their evidence, and starting a candidate.

- ``GET /admin/deployments/{d}/canary``: arms (version, engine model, fraction), the running canary's
  per-arm statistics, the rule, the newest decisions.
- ``POST /admin/deployments/{d}/canary {"candidate_version": n}``: serve version ``n`` to
  ``[production.canary] fraction`` of new sessions (or ``"fraction"``); its weights are the adapter
  folder of the run's checkpoint of that version, or ``"path"`` (an adapter folder on the gateway's
  machine), or ``"engine_model"`` (a model the engines already serve). 201 with the new state.
- ``POST /admin/deployments/{d}/canary/evaluate``: evaluate now instead of at the next periodic pass.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harnessrl.gateway.admin import json_response
from harnessrl.gateway.errors import BadRequest, GatewayError
from harnessrl.gateway.http import read_json
from harnessrl.production.canary import Canary, decision_json
from harnessrl.production.canary_weights import CanaryError, Weights

if TYPE_CHECKING:
    from harnessrl.production.admin import AdminRoute, DeploymentLookup


class CanaryAdmin:
    def __init__(self, api: DeploymentLookup, canary: Canary) -> None:
        self.api, self.canary = api, canary

    def routes(self, route: AdminRoute) -> list[Route]:
        r = route
        return [
            Route("/admin/deployments/{deployment}/canary", r(self.get), methods=["GET"]),
            Route("/admin/deployments/{deployment}/canary", r(self.start), methods=["POST"]),
            Route("/admin/deployments/{deployment}/canary/evaluate", r(self.evaluate), methods=["POST"]),
        ]

    async def get(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        return json_response(await asyncio.to_thread(self.canary.describe, dep.name))

    async def start(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        body = await read_json(request, 64 * 1024)
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object: {\"candidate_version\": <int>}")
        version, fraction = body.get("candidate_version"), body.get("fraction")
        path, model = body.get("path"), body.get("engine_model")
        if type(version) is not int or version < 1:
            raise BadRequest("'candidate_version' is required: the version to serve as the canary (an integer >= 1)")
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, int | float)):
            raise BadRequest("'fraction' must be a number in (0, 1)")
        for key, value in (("path", path), ("engine_model", model)):
            if value is not None and (not isinstance(value, str) or not value):
                raise BadRequest(f"'{key}' must be a non-empty string")
        weights = Weights(path) if path is not None else None
        try:
            await asyncio.to_thread(self.canary.start, dep.name, version, weights, engine_model=model,
                                    fraction=None if fraction is None else float(fraction))
        except CanaryError as exc:
            raise GatewayError(str(exc), status=409 if "already" in str(exc) else 400, code="canary_refused") \
                from None
        except Exception as exc:  # noqa: BLE001 - the engines refused the weights: say so, keep serving
            raise GatewayError(f"loading version {version} of {dep.name!r} into the engines failed: {exc}",
                               status=502, code="canary_load_failed") from None
        return json_response(await asyncio.to_thread(self.canary.describe, dep.name), 201)

    async def evaluate(self, request: Request) -> Response:
        dep = await self.api.deployment_or_404(request.path_params["deployment"])
        decision = await asyncio.to_thread(self.canary.evaluate, dep.name)
        return json_response({"decision": None if decision is None else decision_json(decision),
                              **await asyncio.to_thread(self.canary.describe, dep.name)})
