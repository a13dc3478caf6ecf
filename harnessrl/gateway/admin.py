"""The admin API, for the controller and the trainer (bearer admin token).

Rollouts are created here (the response is the only place the rollout's API key ever appears), read back
with their calls and rewards, moved along the state machine, and the gateway is paused for weight updates.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import asdict
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.dialect import PINNABLE
from harnessrl.gateway.errors import BadRequest, Forbidden, GatewayError, NotFoundError, Unauthorized
from harnessrl.gateway.http import api_key, read_json
from harnessrl.gateway.pause_gate import PauseGate
from harnessrl.gateway.pool import EnginePool
from harnessrl.gateway.recorder import Recorder
from harnessrl.gateway.rollout_registry import RolloutRegistry, RolloutState, hash_key, new_api_key
from harnessrl.gateway.serving_gc import gc_status
from harnessrl.redaction.text import Redactor, redact_rollout
from harnessrl.store.base import IllegalTransition, NotFound, Store
from harnessrl.types import Call, FailureKind, Rollout, RolloutStatus
from harnessrl.weights.versions import record_policy_version


class GatewayParts(Protocol):
    """What the admin API reads and drives of the gateway (``app.Gateway`` has it)."""

    admin_token: str
    config: GatewayConfig
    gate: PauseGate
    pool: EnginePool
    recorder: Recorder
    registry: RolloutRegistry
    store: Store
    router: Any  # policies.Router or None

    def public_url(self, request: Request) -> str: ...

_ADMIN_BODY_MAX = 64 * 1024 * 1024


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def rollout_json(r: Rollout, redactor: Redactor | None = None) -> dict[str, Any]:
    """The rollout as JSON, with secrets out of what its harness and runner wrote (input, logs, error)."""
    return asdict(redact_rollout(r, redactor) if redactor is not None else r)


def call_json(c: Call) -> dict[str, Any]:
    d = asdict(c)
    d["completion_token_ids"] = c.completion_token_ids
    d["completion_logprobs"] = c.completion_logprobs
    return d


class AdminApi:
    def __init__(self, gw: GatewayParts) -> None:
        self.gw = gw
        self.redact = Redactor(gw.config.redact_patterns)

    def _check(self, request: Request) -> None:
        key = api_key(request)
        if not key:
            raise Unauthorized("the admin API needs 'Authorization: Bearer <admin token>'")
        if not hmac.compare_digest(key.encode(), self.gw.admin_token.encode()):
            raise Forbidden("wrong admin token")

    async def _body(self, request: Request) -> dict[str, Any]:
        body = await read_json(request, _ADMIN_BODY_MAX)
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def route(self, fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                self._check(request)
                return await fn(request)
            except GatewayError as exc:
                return exc.response()
            except NotFound as exc:
                return NotFoundError(str(exc)).response()
            except IllegalTransition as exc:
                return GatewayError(str(exc), status=409, code="illegal_transition").response()
        endpoint.__name__ = fn.__name__
        return endpoint

    # -- rollouts -------------------------------------------------------------------------------------
    async def create_rollout(self, request: Request) -> Response:
        body = await self._body(request)
        for field in ("task_id", "group_id"):
            if not isinstance(body.get(field), str) or not body[field]:
                raise BadRequest(f"'{field}' is required (a non-empty string)")
        if not isinstance(body.get("input", {}), dict):
            raise BadRequest("'input' must be an object")
        if body.get("step") is not None and type(body["step"]) is not int:
            raise BadRequest("'step' must be an integer")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise BadRequest("'metadata' must be an object")
        sampling = metadata.get("sampling", {})
        if not isinstance(sampling, dict) or not set(sampling) <= PINNABLE:
            raise BadRequest(f"'metadata.sampling' pins sampling for the rollout: an object with keys among "
                             f"{sorted(PINNABLE)}")
        key = new_api_key()
        rollout = await asyncio.to_thread(
            self.gw.store.create_rollout,
            task_id=body["task_id"], input=self.redact(body.get("input") or {}), group_id=body["group_id"],
            api_key_hash=hash_key(key), policy_version=self.gw.gate.policy_version,
            run_id=body.get("run_id"), step=body.get("step"), metadata=metadata,
            rollout_id=body.get("rollout_id"),
        )
        self.gw.registry.add(RolloutState(id=rollout.id, key_hash=hash_key(key), sampling=dict(sampling)))
        base = self.gw.public_url(request)
        out = rollout_json(rollout, self.redact)
        out.update(rollout_id=rollout.id, api_key=key, base_url=f"{base}/r/{rollout.id}/v1",
                   anthropic_base_url=f"{base}/r/{rollout.id}")
        return json_response(out, 201)

    async def list_rollouts(self, request: Request) -> Response:
        q = request.query_params
        try:
            limit = min(int(q.get("limit", 100)), 1000)
            offset = int(q.get("offset", 0))
            step = int(q["step"]) if "step" in q else None
            status = RolloutStatus(q["status"]) if "status" in q else None
        except ValueError as exc:
            raise BadRequest(f"bad query parameter: {exc}") from None
        rows = await asyncio.to_thread(self.gw.store.list_rollouts, run_id=q.get("run_id"), status=status,
                                       step=step, limit=limit + 1, offset=offset)
        return json_response({"data": [rollout_json(r, self.redact) for r in rows[:limit]], "limit": limit,
                              "offset": offset, "has_more": len(rows) > limit})

    async def get_rollout(self, request: Request) -> Response:
        rid = request.path_params["rollout"]
        store = self.gw.store

        def read() -> dict[str, Any]:
            out = rollout_json(store.get_rollout(rid), self.redact)
            out["calls"] = [call_json(c) for c in store.get_calls(rid)]
            out["rewards"] = [asdict(r) for r in store.get_rewards(rid)]
            return out

        return json_response(await asyncio.to_thread(read))

    async def set_status(self, request: Request) -> Response:
        rid = request.path_params["rollout"]
        body = await self._body(request)
        try:
            status = RolloutStatus(body.get("status"))
            kind = FailureKind(body["failure_kind"]) if body.get("failure_kind") else None
        except ValueError as exc:
            raise BadRequest(f"{exc}; status is one of {[s.value for s in RolloutStatus]}, "
                             f"failure_kind one of {[k.value for k in FailureKind]}") from None
        kwargs = {k: body[k] for k in ("error", "exit_code", "logs", "runner_handle") if k in body}
        for k in ("error", "logs"):  # what the harness printed or failed with is stored redacted
            if isinstance(kwargs.get(k), str):
                kwargs[k] = self.redact(kwargs[k])
        rollout = await asyncio.to_thread(self.gw.store.transition_rollout, rid, status, failure_kind=kind,
                                          **kwargs)
        if rollout.status.terminal:
            self._forget_closed(rid)
        return json_response(rollout_json(rollout, self.redact))

    def _forget_closed(self, rid: str) -> None:
        """A closed rollout: refuse its calls, drop its histories and its engine affinity."""
        self.gw.registry.mark_closed(rid)
        self.gw.pool.forget(rid)

    async def closed(self, request: Request) -> Response:
        """A controller that closed a rollout in the store itself (scored, or failed) says so here: the gateway
        refuses the rollout's calls from now on and drops what it kept for it (render and fidelity history,
        engine affinity), which otherwise stays until evicted. 409 while the store has it open."""
        rid = request.path_params["rollout"]
        rollout = await asyncio.to_thread(self.gw.store.get_rollout, rid)
        if not rollout.status.terminal:
            raise GatewayError(f"rollout {rid!r} is {rollout.status.value} in the store; close it first "
                               "(POST /admin/rollouts/{rollout}/status)", status=409, code="rollout_open")
        self._forget_closed(rid)
        return json_response({"rollout_id": rid, "status": rollout.status.value})

    # -- weight updates -------------------------------------------------------------------------------
    async def pause(self, request: Request) -> Response:
        body = await self._body(request) if int(request.headers.get("content-length") or 0) else {}
        drained = await self.gw.gate.pause(body.get("timeout_s", 600.0))
        return json_response({"paused": True, "drained": drained, "in_flight": self.gw.gate.in_flight})

    async def resume(self, request: Request) -> Response:
        self.gw.gate.resume()
        return json_response({"paused": False, "policy_version": self.gw.gate.policy_version})

    async def policy_version(self, request: Request) -> Response:
        body = await self._body(request)
        version = body.get("version")
        if type(version) is not int or version < 0:
            raise BadRequest("'version' must be a non-negative integer")
        engine_model = body.get("engine_model")
        if engine_model is not None and (not isinstance(engine_model, str) or not engine_model):
            raise BadRequest("'engine_model' must be a non-empty string (the model name sent to the engines)")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise BadRequest("'metadata' must be a JSON object")
        policy = body.get("policy")
        if policy is not None:  # several policies: only this one's version and engine model move
            router = self.gw.router
            if router is None or policy not in router.policies:
                raise BadRequest(f"'policy' {policy!r} is not a policy of this gateway "
                                 f"({sorted(router.policies) if router else 'it has one policy'})")
            if body.get("record"):  # policy_versions is keyed (run, version): one policy's numbering
                raise BadRequest("per-policy versions are not recorded in policy_versions (keyed by run and "
                                 "version); each call records its policy and version, checkpoints record both")
            router.set_version(policy, version, engine_model)
            return json_response({"policy": policy, "policy_version": version})
        if engine_model is not None:
            # A publisher swapped what the engines serve (a new LoRA name, or a restarted server): route
            # later calls there, and re-check health now so a restarted engine is not left marked down.
            self.gw.config.engine_model = engine_model
            for engine in self.gw.pool.engines:
                engine.model = engine_model
            await self.gw.pool.check_health()
        self.gw.gate.policy_version = version
        if body.get("record"):
            await asyncio.to_thread(record_policy_version, self.gw.store, version, body.get("checkpoint_path"),
                                    run_id=body.get("run_id"), metadata=metadata)
        return json_response({"policy_version": version})

    async def status(self, request: Request) -> Response:
        gate = self.gw.gate
        return json_response({"paused": gate.paused, "in_flight": gate.in_flight, "waiting": gate.waiting,
                              "policy_version": gate.policy_version, "engines": self.gw.pool.status(),
                              "in_flight_models": dict(self.gw.pool.in_flight_models),
                              "recorded": self.gw.recorder.recorded, "commits": self.gw.recorder.batches,
                              "commits_on_loop": self.gw.recorder.batches_on_loop, "gc": gc_status()})
