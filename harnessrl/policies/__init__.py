"""Several policies in one run: config ([policies.<name>], [routing]) and the gateway's call routing."""

from harnessrl.policies.config import PolicyConfig, RoutingConfig, ServedPolicy
from harnessrl.policies.routing import Router, RoutingRefused

__all__ = ["PolicyConfig", "Router", "RoutingConfig", "RoutingRefused", "ServedPolicy"]
