"""Routing a call to a policy: header beats model name, a policy's own name, the default, or a refusal."""

from __future__ import annotations

import pytest

from harnessrl.policies import Router, RoutingConfig, RoutingRefused, ServedPolicy


def _router(**routing: object) -> Router:
    policies = {"planner": ServedPolicy(), "solver": ServedPolicy(), "judge": ServedPolicy(frozen=True)}
    return Router(RoutingConfig(**routing), policies)


def test_model_name_header_and_policy_name_route() -> None:
    r = _router(models={"gpt-4o-mini": "planner", "gpt-4o": "solver"})
    assert r.route("gpt-4o-mini") == "planner"
    assert r.route("gpt-4o") == "solver"
    assert r.route("judge") == "judge"  # a policy's own name routes to it
    assert r.route("gpt-4o", {"x-harnessrl-policy": "judge"}) == "judge"  # the header wins


def test_unmatched_goes_to_default_or_is_refused() -> None:
    assert _router(default="solver").route("claude-whatever") == "solver"
    assert _router().route(None) == "planner"  # no default named: the first policy
    refusing = _router(unmatched="refuse", models={"a": "planner"})
    with pytest.raises(RoutingRefused, match="routed to no policy"):
        refusing.route("claude-whatever")
    with pytest.raises(RoutingRefused, match="names no policy"):
        refusing.route("a", {"x-harnessrl-policy": "nobody"})


def test_routes_to_undefined_policies_are_refused_at_start() -> None:
    with pytest.raises(ValueError, match="does not define"):
        _router(models={"gpt-4o": "coder"})
    with pytest.raises(ValueError, match="does not define"):
        _router(default="coder")


def test_versions_move_per_policy() -> None:
    r = _router()
    r.set_version("planner", 3, "planner-v3")
    assert r.versions == {"planner": 3, "solver": 0, "judge": 0}
    assert r.engine_models["planner"] == "planner-v3" and r.engine_models["solver"] is None
