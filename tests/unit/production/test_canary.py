"""The canary: the decision rule, arm assignment, start/evaluate/promote/rollback over a real store (every
driver), and a restart that reads the state back and loads the served adapters again."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harnessrl.production.canary import CANARY, STABLE, Canary
from harnessrl.production.canary_stats import decide, in_canary
from harnessrl.production.canary_weights import CanaryError, Weights
from harnessrl.production.config import CanaryConfig
from harnessrl.store import Store, open_store
from harnessrl.store.canary import ArmStats

RULE = CanaryConfig(fraction=0.2, min_sessions=3, max_regression=0.05)


def _arm(arm: str, decided: int, mean: float | None) -> ArmStats:
    return ArmStats(arm, 0 if arm == STABLE else 1, decided, decided, mean)


# -- the rule ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("stable", "candidate", "action"), [
    ((3, 0.50), (3, 0.80), "promote"),      # better
    ((3, 0.50), (3, 0.46), "promote"),      # worse, within max_regression
    ((3, 0.50), (3, 0.44), "rollback"),     # worse beyond it
    ((3, 0.50), (3, 0.00), "rollback"),
    ((2, 0.50), (9, 1.00), "hold"),         # stable arm short of min_sessions
    ((9, 0.50), (2, 1.00), "hold"),         # candidate arm short
    ((0, None), (0, None), "hold"),
    ((3, 0.70), (3, 0.70), "promote"),      # a tie promotes
])
def test_rule(stable: tuple[int, float | None], candidate: tuple[int, float | None], action: str) -> None:
    v = decide(_arm(STABLE, *stable), _arm(CANARY, *candidate), RULE)
    assert v.action == action, v.reason


def test_rule_boundary_is_inclusive_despite_float_error() -> None:
    # 0.6 - 0.1 is 0.49999999999999994 in floats; a candidate at exactly 0.5 is within the allowed regression
    rule = CanaryConfig(min_sessions=1, max_regression=0.1)
    assert decide(_arm(STABLE, 10, 0.6), _arm(CANARY, 10, 0.5), rule).action == "promote"
    assert decide(_arm(STABLE, 10, 0.6), _arm(CANARY, 10, 0.4999), rule).action == "rollback"
    assert decide(None, _arm(CANARY, 10, 1.0), rule).action == "hold"
    assert "waiting for 3 decided sessions per arm: stable 2, candidate 3" in decide(
        _arm(STABLE, 2, 0.1), _arm(CANARY, 3, 0.1), RULE).reason


def _thumbs(arm: str, ups: int, n: int) -> ArmStats:
    """An arm of ``n`` thumbs (1 or 0), ``ups`` of them up."""
    return ArmStats(arm, 0 if arm == STABLE else 1, n, n, ups / n, ups / n)


def test_confidence_rule_waits_for_evidence_that_clears_the_margin() -> None:
    rule = CanaryConfig(min_sessions=24, max_regression=0.05, confidence=0.9, max_sessions=200)
    # 24 thumbs per arm: 0.29 vs 0.46 trails by 0.17, but two such means differ by ~0.14 by chance alone
    held = decide(_thumbs(STABLE, 11, 24), _thumbs(CANARY, 7, 24), rule)
    assert held.action == "hold" and "not decided yet" in held.reason, held.reason
    assert decide(_thumbs(STABLE, 11, 24), _thumbs(CANARY, 7, 24), RULE.model_copy(
        update={"min_sessions": 24})).action == "rollback"  # the plain comparison decides on the same evidence
    assert decide(_thumbs(STABLE, 40, 150), _thumbs(CANARY, 50, 150), rule).action == "promote"  # 0.33 vs 0.27
    assert decide(_thumbs(STABLE, 60, 150), _thumbs(CANARY, 25, 150), rule).action == "rollback"  # 0.17 vs 0.40
    # at max_sessions the means decide as without confidence
    at_cap = decide(_thumbs(STABLE, 60, 200), _thumbs(CANARY, 52, 200), rule)  # 0.26 vs 0.30: within 0.05
    assert at_cap.action == "promote" and "bounds" not in at_cap.reason, at_cap.reason
    # no second moment (evidence from before it was recorded): nothing to bound, so it holds
    assert decide(_arm(STABLE, 30, 0.5), _arm(CANARY, 30, 0.5), rule).action == "hold"


def test_confidence_rule_settings_are_checked() -> None:
    assert CanaryConfig(min_sessions=10, confidence=0.9).decide_by_mean_at == 40
    for bad in ({"confidence": 0.5}, {"confidence": 1.0}, {"min_sessions": 10, "max_sessions": 5}):
        with pytest.raises(ValueError):
            CanaryConfig(**bad)


def test_assignment_is_stable_per_session_and_close_to_fraction() -> None:
    ids = [f"session-{i}" for i in range(20_000)]
    first = [in_canary("app", 3, s, 0.1) for s in ids]
    assert first == [in_canary("app", 3, s, 0.1) for s in ids]  # the same answer every time
    assert abs(sum(first) / len(ids) - 0.1) < 0.01  # 0.1 +- 5 standard deviations (0.0021)
    assert abs(sum(in_canary("app", 3, s, 0.5) for s in ids) / len(ids) - 0.5) < 0.015
    other = [in_canary("app", 4, s, 0.1) for s in ids]  # another candidate: another subset, same share
    overlap = sum(a and b for a, b in zip(first, other, strict=True)) / max(sum(first), 1)
    assert 0.05 < overlap < 0.15  # independent draws: ~fraction of the first subset, not all of it


# -- the canary over a store ------------------------------------------------------------------------------
class Loader:
    """Records what the canary loads and drops (the engines themselves: tests/integration/production)."""

    def __init__(self) -> None:
        self.loaded: dict[str, tuple[int, str | None]] = {}
        self.log: list[tuple[str, str]] = []

    def load(self, name: str, version: int, weights: Weights) -> None:
        self.loaded[name] = (version, weights.path)
        self.log.append(("load", name))

    def drop(self, name: str) -> None:
        self.loaded.pop(name, None)
        self.log.append(("drop", name))


def _sessions(store: Store, dep: str, arm: str, version: int, outcomes: list[float | None]) -> None:
    """Sessions served by (arm, version) whose windows closed with these outcomes (None: dropped)."""
    for o in outcomes:
        sid = f"{arm}-{version}-{time.perf_counter_ns()}"
        store.open_session(dep, sid, key_id="k", arm=arm, policy_version=version, recorded=False, window_s=60.0,
                           rollout_key_hash="x")
        status = "dropped" if o is None else "scored"
        store.close_window(dep, sid, lambda _feedback, o=o, status=status: (o, status),  # type: ignore[misc]
                           now=time.time() + 120)


@pytest.fixture
def dep(store: Store) -> str:
    store.create_deployment("app", {})
    return "app"


def test_arm_stats_carry_the_spread_of_the_outcomes(store: Store, dep: str) -> None:
    _sessions(store, dep, STABLE, 0, [1.0, 0.0, 1.0, 1.0, None])
    (arm,) = store.arm_stats(dep, 0.0)
    assert (arm.sessions, arm.decided) == (5, 4)
    assert arm.mean == pytest.approx(0.75) and arm.mean_sq == pytest.approx(0.75)
    assert arm.variance == pytest.approx(0.25)  # sample variance of 1, 0, 1, 1
    assert ArmStats(**{**arm.as_dict(), "decided": 1}).variance is None  # one outcome has no spread


def test_start_serves_the_candidate_beside_stable_and_promotes_a_better_one(store: Store, dep: str) -> None:
    loader = Loader()
    canary = Canary(store, RULE, loader)
    assert [(a.arm, a.version, a.engine_model, a.fraction) for a in canary.arms(dep)] == [(STABLE, 0, None, 1.0)]
    canary.start(dep, 1, Weights("/ckpt/v1"))
    assert loader.loaded == {"app-v1": (1, "/ckpt/v1")}
    assert [(a.arm, a.version, a.engine_model, a.fraction) for a in canary.arms(dep)] == [
        (STABLE, 0, None, 0.8), (CANARY, 1, "app-v1", 0.2)]
    picks = [canary.assign(dep, f"s{i}") for i in range(2000)]
    assert 0.15 < sum(a.arm == CANARY for a in picks) / len(picks) < 0.25
    assert {(a.arm, a.version, a.engine_model) for a in picks} == {(STABLE, 0, None), (CANARY, 1, "app-v1")}

    _sessions(store, dep, STABLE, 0, [0.0, 1.0, 0.0, None])
    _sessions(store, dep, CANARY, 1, [1.0, 1.0])
    hold = canary.evaluate(dep)
    assert hold is not None and hold.action == "hold" and "candidate 2" in hold.reason
    assert canary.evaluate(dep) is None  # nothing new: an identical hold is not recorded again
    store.open_session(dep, "still-open", key_id="k", arm=CANARY, policy_version=1, recorded=False, window_s=60.0,
                       rollout_key_hash="x")
    assert canary.evaluate(dep) is None  # a session without an outcome yet decides nothing either
    _sessions(store, dep, CANARY, 1, [0.0])  # candidate 2/3 vs stable 1/3
    promote = canary.evaluate(dep)
    assert promote is not None and promote.action == "promote"
    arms = {a["arm"]: a for a in promote.stats["arms"]}
    assert (arms[STABLE]["decided"], arms[STABLE]["sessions"], arms[CANARY]["decided"]) == (3, 4, 3)
    assert arms[CANARY]["sessions"] == 4  # the open one is served, not decided
    assert arms[CANARY]["mean"] == pytest.approx(2 / 3) and arms[STABLE]["mean"] == pytest.approx(1 / 3)
    # the candidate now serves every new session, under its adapter; nothing was dropped (stable was the base)
    assert [(a.arm, a.version, a.engine_model, a.fraction) for a in canary.arms(dep)] == [
        (STABLE, 1, "app-v1", 1.0)]
    assert loader.log == [("load", "app-v1")]
    assert [d.action for d in store.canary_decisions(dep)] == ["start", "hold", "promote"]
    assert canary.evaluate(dep) is None  # no canary any more
    # a session of the old stable version is now served by the new one (its own is no longer served)
    assert canary.serving(dep, STABLE, 0).version == 1 and canary.serving(dep, CANARY, 1).engine_model == "app-v1"


def test_a_worse_candidate_is_rolled_back_and_dropped(store: Store, dep: str) -> None:
    loader = Loader()
    canary = Canary(store, RULE, loader)
    canary.start(dep, 1, Weights("/ckpt/v1"))
    _sessions(store, dep, STABLE, 0, [1.0, 1.0, 0.0])
    _sessions(store, dep, CANARY, 1, [0.0, 0.0, 1.0])
    decision = canary.evaluate(dep)
    assert decision is not None and decision.action == "rollback" and "trails by 0.3333" in decision.reason
    assert loader.loaded == {} and loader.log == [("load", "app-v1"), ("drop", "app-v1")]
    assert [(a.arm, a.version, a.engine_model) for a in canary.arms(dep)] == [(STABLE, 0, None)]
    assert canary.serving(dep, CANARY, 1).arm == STABLE  # the canary's open sessions go back to stable
    assert all(canary.assign(dep, f"s{i}").arm == STABLE for i in range(200))


def test_promotion_chain_drops_the_replaced_stable_adapter(store: Store, dep: str) -> None:
    loader = Loader()
    canary = Canary(store, CanaryConfig(fraction=0.5, min_sessions=1, max_regression=0.0), loader)
    canary.start(dep, 1, Weights("/ckpt/v1"))
    _sessions(store, dep, STABLE, 0, [0.0])
    _sessions(store, dep, CANARY, 1, [1.0])
    assert canary.evaluate(dep).action == "promote"  # type: ignore[union-attr]
    with pytest.raises(CanaryError, match="must be newer than the stable version 1"):
        canary.start(dep, 1, Weights("/ckpt/v1"))
    canary.start(dep, 2, Weights("/ckpt/v2"))
    assert [(a.arm, a.version, a.engine_model) for a in canary.arms(dep)] == [
        (STABLE, 1, "app-v1"), (CANARY, 2, "app-v2")]
    _sessions(store, dep, STABLE, 1, [0.5])
    _sessions(store, dep, CANARY, 2, [0.5])
    assert canary.evaluate(dep).action == "promote"  # type: ignore[union-attr]
    assert loader.log == [("load", "app-v1"), ("load", "app-v2"), ("drop", "app-v1")]
    assert [(a.arm, a.version, a.engine_model) for a in canary.arms(dep)] == [(STABLE, 2, "app-v2")]


def test_a_new_candidate_replaces_a_running_one_recorded_as_rollback(store: Store, dep: str) -> None:
    loader = Loader()
    canary = Canary(store, RULE, loader)
    canary.start(dep, 1, Weights("/ckpt/v1"))
    with pytest.raises(CanaryError, match="already the canary"):
        canary.start(dep, 1, Weights("/ckpt/v1"))
    canary.start(dep, 2, Weights("/ckpt/v2"), fraction=0.3)
    assert [(d.action, d.candidate_version) for d in store.canary_decisions(dep)] == [
        ("start", 1), ("rollback", 1), ("start", 2)]
    assert "replaced by candidate version 2" in store.canary_decisions(dep)[1].reason
    assert loader.loaded == {"app-v2": (2, "/ckpt/v2")}
    assert canary.arms(dep)[1].fraction == 0.3


def test_refusals_say_what_to_do(store: Store, dep: str) -> None:
    with pytest.raises(CanaryError, match="pass engine_model"):
        Canary(store, RULE).start(dep, 1, Weights("/ckpt/v1"))
    with pytest.raises(CanaryError, match="no checkpoint in the store"):
        Canary(store, RULE, Loader()).start(dep, 7)
    with pytest.raises(CanaryError, match=r"fraction must be in \(0, 1\)"):
        Canary(store, RULE, Loader()).start(dep, 1, Weights("/x"), fraction=1.0)
    # an engine that already serves the candidate under a name: nothing to load
    canary = Canary(store, RULE)
    canary.start(dep, 1, engine_model="served-elsewhere")
    assert canary.arms(dep)[1].engine_model == "served-elsewhere"


def test_candidate_from_the_runs_checkpoint(store: Store, dep: str, tmp_path: Any) -> None:
    folder = tmp_path / "v3" / "adapter"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    store.add_policy_version(3, str(tmp_path / "v3"), run_id=store.get_deployment(dep).run_id)
    loader = Loader()
    Canary(store, RULE, loader).start(dep, 3)
    assert loader.loaded == {"app-v3": (3, str(folder.resolve()))}


def test_restart_reads_the_state_back_and_loads_the_served_adapters(store_url: str) -> None:
    store = open_store(store_url)
    store.create_deployment("app", {})
    canary = Canary(store, RULE, Loader())
    canary.start("app", 1, Weights("/ckpt/v1"))
    _sessions(store, "app", STABLE, 0, [0.0] * 3)
    _sessions(store, "app", CANARY, 1, [1.0] * 3)
    canary.evaluate("app")  # promote: v1 is stable
    canary.start("app", 2, Weights("/ckpt/v2"), fraction=0.4)
    store.close()

    store = open_store(store_url)
    try:
        loader = Loader()
        again = Canary(store, RULE, loader)
        again.restore_all()
        assert loader.loaded == {"app-v1": (1, "/ckpt/v1"), "app-v2": (2, "/ckpt/v2")}
        assert [(a.arm, a.version, a.engine_model, a.fraction) for a in again.arms("app")] == [
            (STABLE, 1, "app-v1", 0.6), (CANARY, 2, "app-v2", 0.4)]
        # the same sessions land in the same arms as before the restart
        assert [again.assign("app", f"s{i}") for i in range(100)] == [canary.assign("app", f"s{i}")
                                                                      for i in range(100)]
        # sessions decided before the candidate's start do not count for it
        assert again.evaluate("app").action == "hold"  # type: ignore[union-attr]
        assert again.describe("app")["arms"] == [
            {"arm": STABLE, "version": 1, "engine_model": "app-v1", "fraction": 0.6},
            {"arm": CANARY, "version": 2, "engine_model": "app-v2", "fraction": 0.4}]
        assert [d["action"] for d in again.describe("app")["decisions"]] == ["start", "promote", "start", "hold"]
        assert 'harnessrl_canary_fraction{deployment="app",arm="canary"} 0.4' in again.metric_lines()
        assert 'harnessrl_canary_version{deployment="app",arm="stable"} 1' in again.metric_lines()
    finally:
        store.close()


def test_arm_plan_assigns_from_the_canary_and_resumes_stored_sessions(store: Store, dep: str) -> None:
    from harnessrl.production.arms import ArmPlan, Assignment

    plan = ArmPlan(store, lambda: 0, RULE, Loader())
    assert plan.assign(dep, "s1") == Assignment(STABLE, 0, None)
    assert plan.canary is not None
    plan.canary.start(dep, 1, Weights("/ckpt/v1"))
    picks = {plan.assign(dep, f"s{i}") for i in range(200)}
    assert picks == {Assignment(STABLE, 0, None), Assignment(CANARY, 1, "app-v1")}
    assert plan.resumed(dep, CANARY, 1) == Assignment(CANARY, 1, "app-v1")
    _sessions(store, dep, STABLE, 0, [1.0] * 3)
    _sessions(store, dep, CANARY, 1, [0.0] * 3)
    import asyncio

    assert [d.action for d in asyncio.run(plan.evaluate())] == ["rollback"]
    # a canary session opened before the rollback is served by the stable version from now on
    assert plan.resumed(dep, CANARY, 1) == Assignment(CANARY, 0, None)
    assert 'harnessrl_canary_fraction{deployment="app",arm="stable"} 1' in plan.metric_lines()
    assert ArmPlan(None, lambda: 4).assign(dep, "x") == Assignment(STABLE, 4)


def test_epoch_moves_with_every_change_of_what_serves(store: Store, dep: str) -> None:
    from harnessrl.production.arms import ArmPlan

    plan = ArmPlan(store, lambda: 0, RULE, Loader())
    assert plan.canary is not None and plan.epoch(dep) == 0
    plan.canary.start(dep, 1, Weights("/ckpt/v1"))
    assert plan.epoch(dep) == 1
    _sessions(store, dep, STABLE, 0, [0.0])
    plan.canary.evaluate(dep)  # a hold changes nothing that serves
    assert plan.epoch(dep) == 1
    _sessions(store, dep, STABLE, 0, [0.0] * 2)
    _sessions(store, dep, CANARY, 1, [1.0] * 3)
    plan.canary.evaluate(dep)  # promote
    assert plan.epoch(dep) == 2 and plan.epoch("other") == 0


def test_two_gateways_on_one_database_follow_each_others_decisions(store: Store, dep: str) -> None:
    one_loader, two_loader = Loader(), Loader()
    one, two = Canary(store, RULE, one_loader), Canary(store, RULE, two_loader)
    assert two.arms(dep)[0].version == 0  # two has read (and cached) the state before one starts a canary
    one.start(dep, 1, Weights("/ckpt/v1"))
    assert two.evaluate(dep) is not None  # two follows the start (loads the candidate), then holds
    assert two_loader.loaded == {"app-v1": (1, "/ckpt/v1")}
    assert [a.version for a in two.arms(dep)] == [0, 1]
    assert [two.assign(dep, f"s{i}").arm for i in range(50)] == [one.assign(dep, f"s{i}").arm for i in range(50)]
    _sessions(store, dep, STABLE, 0, [0.0] * 3)
    _sessions(store, dep, CANARY, 1, [1.0] * 3)
    # a race: two decides while one is between reading the store and writing its own decision
    real = one._evidence

    def racing(deployment: str, st: object) -> dict:
        evidence = real(deployment, st)  # type: ignore[arg-type]
        assert two.evaluate(deployment).action == "promote"  # type: ignore[union-attr]
        return evidence

    one._evidence = racing  # type: ignore[method-assign]
    assert one.evaluate(dep) is None  # its promote is refused (CanaryConflict): it follows two's instead
    assert [a.version for a in one.arms(dep)] == [1] == [a.version for a in two.arms(dep)]
    assert [d.action for d in store.canary_decisions(dep)] == ["start", "hold", "promote"]
    assert one_loader.loaded == two_loader.loaded == {"app-v1": (1, "/ckpt/v1")}
    assert one.epochs[dep] == 2  # its start, the promote it followed (two's hold changed nothing served)
