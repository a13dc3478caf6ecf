"""The recording gateway: the model endpoint every harness talks to, recording each call exactly.

In-process use: ``serve_in_thread(store, engines)`` returns a running ``GatewayServer`` (``.url``,
``.gateway.admin_token``, ``.stop()``). Command line: ``harnessrl gateway --engine URL --db sqlite:///x.db``.
"""

from harnessrl.gateway.app import Gateway, GatewayServer, serve_in_thread
from harnessrl.gateway.config import GatewayConfig, GatewayLimits

__all__ = ["Gateway", "GatewayConfig", "GatewayLimits", "GatewayServer", "serve_in_thread"]
