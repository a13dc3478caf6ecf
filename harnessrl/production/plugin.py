"""Production mode on a gateway: the plug-in a composing layer hands ``Gateway(..., plugins=...)``.

The gateway knows nothing of production; ``gateway_plugins`` says what a gateway with this config serves
beside its rollout routes (``[gateway] mode = "production"``: deployed applications under ``/p/``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessrl.production.config import ProductionConfig
from harnessrl.production.routes import ProductionApi

if TYPE_CHECKING:
    from harnessrl.gateway.config import GatewayConfig
    from harnessrl.gateway.plugins import GatewayPlugin, PluginFactory, PluginHost


def production_plugin(config: ProductionConfig | None = None) -> PluginFactory:
    """Production mode (``routes.ProductionApi``) with ``config`` (default: ``ProductionConfig()``)."""
    config = config or ProductionConfig()

    def build(host: PluginHost) -> GatewayPlugin:
        return ProductionApi(host, config)

    return build


def gateway_plugins(gateway: GatewayConfig, production: ProductionConfig | None = None) -> list[PluginFactory]:
    """The plug-ins of a gateway with this config: production mode's when ``[gateway] mode = "production"``."""
    return [production_plugin(production)] if gateway.mode == "production" else []
