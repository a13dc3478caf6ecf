"""How a feature plugs into the gateway without the gateway knowing it (production mode is one).

A plug-in is built from a ``PluginHost``: the few things of the gateway it may use (serve a call on a
rollout state, translate, count tokens, the store, the limits, the rollout registry, the admin check).
It answers with what it adds: routes, periodic tasks (run while serving; ``final`` ones once more at
shutdown) and lines for ``/metrics``. Whoever composes a gateway passes the plug-ins' factories
(``Gateway(store, config, plugins=[...])``); the gateway imports none of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from harnessrl.gateway.apis.base import Translation
    from harnessrl.gateway.config import GatewayLimits
    from harnessrl.gateway.rollout_registry import RolloutRegistry, RolloutState
    from harnessrl.store.base import Store
    from harnessrl.types import ApiKind


@dataclass(frozen=True)
class Periodic:
    """A task run every ``interval_s`` while the gateway serves; ``final``: once more at shutdown. A failing
    pass is logged and the next one runs."""

    task: Callable[[], Awaitable[Any]]
    interval_s: float
    final: bool = False


class PluginHost(Protocol):
    """What a plug-in gets of the gateway."""

    store: Store
    limits: GatewayLimits
    #: The engines' base URLs (a plug-in that loads weights into them, such as the canary).
    engines: list[str]
    registry: RolloutRegistry
    #: ``[gateway] images = "pass"``: a user turn's images reach the engine (else they are refused).
    images: bool

    def policy_version(self) -> int:
        """The policy version the pause gate stamps on calls now."""

    def forget_affinity(self, rollout_id: str) -> None:
        """Drop a rollout's engine affinity (its calls may go to any engine)."""

    async def serve(self, request: Request, api: ApiKind, state: RolloutState, body: Any, t0: float) -> Any:
        """Serve one call on an authorized rollout state, with the gateway's limits, pause gate, engines and
        recording; an ASGI app that sends the answer."""

    def translate(self, state: RolloutState, api: ApiKind, body: Any, request: Request) -> Translation:
        """A request of ``api`` as a chat request (what ``count_tokens`` counts)."""

    async def count_tokens(self, state: RolloutState, chat_body: dict) -> int:
        """Prompt tokens of a chat request (not a sampled call: not recorded)."""

    def models_response(self) -> Response:
        """The answer of ``GET /v1/models``."""

    def public_url(self, request: Request) -> str:
        """The gateway's base URL as its clients reach it."""

    def admin_route(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` behind the admin token check, its ``GatewayError``s answered as JSON errors."""


class GatewayPlugin(Protocol):
    """What a plug-in adds to the gateway."""

    def routes(self) -> list[BaseRoute]: ...

    def periodic(self) -> list[Periodic]: ...

    def metrics_lines(self) -> list[str]: ...


#: Builds a plug-in on a gateway (called once, while the gateway is built).
PluginFactory = Callable[[PluginHost], GatewayPlugin]
