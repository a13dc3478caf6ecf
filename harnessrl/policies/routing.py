"""Which policy serves a call: the header, the requested model name, a policy's own name, the default."""

from __future__ import annotations

from collections.abc import Mapping

from harnessrl.policies.config import RoutingConfig, ServedPolicy


class RoutingRefused(LookupError):
    """The call matches no route and ``[routing] unmatched = "refuse"`` (or a header names no policy)."""


class Router:
    """Routes a call to a policy name; versions and engine models per policy live here too (the gateway's
    admin API moves them when a policy is published)."""

    def __init__(self, routing: RoutingConfig, policies: Mapping[str, ServedPolicy]) -> None:
        if not policies:
            raise ValueError("a Router needs at least one policy")
        unknown = sorted({p for p in routing.models.values() if p not in policies}
                         | ({routing.default} - set(policies) - {None}))
        if unknown:
            raise ValueError(f"[routing] names policies that [policies] does not define: {unknown}; "
                             f"defined: {sorted(policies)}")
        self.routing = routing
        self.policies = dict(policies)
        self.default = routing.default or next(iter(policies))
        self.header = routing.header.lower()
        self.versions: dict[str, int] = dict.fromkeys(policies, 0)
        self.engine_models: dict[str, str | None] = {n: p.engine_model for n, p in policies.items()}

    def route(self, requested_model: str | None, headers: Mapping[str, str] | None = None) -> str:
        """The policy serving this call, or ``RoutingRefused`` with a message naming what would match."""
        named = (headers or {}).get(self.header)
        if named is not None:
            if named not in self.policies:
                raise RoutingRefused(f"header {self.header}: {named!r} names no policy; policies: "
                                     f"{sorted(self.policies)}")
            return named
        if requested_model is not None:
            if requested_model in self.routing.models:
                return self.routing.models[requested_model]
            if requested_model in self.policies:
                return requested_model
        if self.routing.unmatched == "default":
            return self.default
        raise RoutingRefused(f"model {requested_model!r} is routed to no policy; ask for one of "
                             f"{sorted(set(self.routing.models) | set(self.policies))}")

    def set_version(self, policy: str, version: int, engine_model: str | None = None) -> None:
        if policy not in self.policies:
            raise KeyError(policy)
        self.versions[policy] = version
        if engine_model is not None:
            self.engine_models[policy] = engine_model
