"""The deployments a production gateway serves: created from ``[production.deployments]`` at start or
with the admin API, read from the store once and then kept in memory (a deployment is never deleted)."""

from __future__ import annotations

import asyncio

from pydantic import ValidationError

from harnessrl.gateway.errors import BadRequest, GatewayError
from harnessrl.production.config import DeploymentConfig, ProductionConfig, check_deployment_name
from harnessrl.store.base import AlreadyExists, NotFound, Store
from harnessrl.store.deployments import Deployment


class Deployments:
    def __init__(self, store: Store, config: ProductionConfig) -> None:
        self._store, self._config = store, config
        self._known: dict[str, tuple[Deployment, DeploymentConfig]] = {}

    def ensure_configured(self) -> None:
        """Create the deployments of the config file that the store does not hold yet (blocking)."""
        for name, cfg in self._config.deployments.items():
            try:
                self._store.create_deployment(name, cfg.model_dump(exclude_none=True))
            except AlreadyExists:
                pass

    async def get(self, name: str) -> tuple[Deployment, DeploymentConfig] | None:
        """The deployment and its settings, or None when there is no such deployment."""
        hit = self._known.get(name)
        if hit is not None:
            return hit
        try:
            dep = await asyncio.to_thread(self._store.get_deployment, name)
        except NotFound:
            return None
        hit = self._known[name] = (dep, DeploymentConfig.model_validate(dep.config))
        return hit

    async def create(self, name: object, settings: dict[str, object]) -> Deployment:
        """A new deployment (409 when the name is taken)."""
        if not isinstance(name, str):
            raise BadRequest("'name' is required: the deployment's name (it becomes /p/<name>/v1)")
        try:
            check_deployment_name(name)
            cfg = DeploymentConfig.model_validate(settings)
        except (ValueError, ValidationError) as exc:
            raise BadRequest(str(exc)) from None
        try:
            dep = await asyncio.to_thread(self._store.create_deployment, name, cfg.model_dump(exclude_none=True))
        except AlreadyExists as exc:
            raise GatewayError(str(exc), status=409, code="deployment_exists") from None
        self._known[name] = (dep, cfg)
        return dep

    def record_fraction(self, name: str, cfg: DeploymentConfig) -> float:
        return self._config.record_fraction_of(name, cfg)
