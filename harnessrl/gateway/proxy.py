"""The hot path: one harness model call -> engine -> durable record -> response.

Order matters and is the guarantee: the call is committed to the store before the harness receives the
response (for streams: before the last chunk and ``[DONE]``). Limits are checked before the engine is
asked; the engine is retried elsewhere only while nothing has been sent to the harness.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from harnessrl.gateway import dialect
from harnessrl.gateway.apis import anthropic, encode_complete, responses
from harnessrl.gateway.apis.base import Translation
from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.errors import (
    BadRequest,
    EngineUnavailable,
    GatewayError,
    LimitExceeded,
    PayloadTooLarge,
    RolloutClosedError,
    UpstreamError,
)
from harnessrl.gateway.fidelity import classify_prompt
from harnessrl.gateway.pause import PauseGate
from harnessrl.gateway.pool import CONNECT_ERRORS, RETRY_STATUSES, STREAM_ERRORS, Engine, EnginePool
from harnessrl.gateway.recorder import Recorder
from harnessrl.gateway.relay import Relay
from harnessrl.gateway.rollouts import RolloutRegistry, RolloutState
from harnessrl.gateway.upstream import UpstreamResponse
from harnessrl.store.base import NewCall, RolloutClosed
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

log = logging.getLogger(__name__)
_PATHS = {ApiKind.CHAT: "/chat/completions", ApiKind.COMPLETIONS: "/completions"}
#: APIs served by translation to and from chat.
WIRE = (ApiKind.ANTHROPIC_MESSAGES, ApiKind.RESPONSES)
#: Responses kept per rollout for ``previous_response_id`` (most recent first out).
KEEP_RESPONSES = 64


def encoder(api: ApiKind, model: str, body: dict, t: Translation) -> Any:
    """The event encoder of a translated API (see ``apis.Encoder``)."""
    if api == ApiKind.ANTHROPIC_MESSAGES:
        return anthropic.MessageEncoder(model)
    return responses.ResponseEncoder(model, body, t.names)


def api_key(request: Request) -> str | None:
    auth = request.headers.get("authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request body as JSON, refusing oversize bodies before reading them whole."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"malformed JSON body: {exc}") from None


class Proxy:
    def __init__(self, config: GatewayConfig, pool: EnginePool, recorder: Recorder,
                 registry: RolloutRegistry, gate: PauseGate) -> None:
        self.config = config
        self.pool = pool
        self.recorder = recorder
        self.registry = registry
        self.gate = gate
        self.renderer: Any = None  # set by the app in render_mode "gateway" (see render_seam.py)

    async def handle(self, request: Request, api: ApiKind) -> Response:
        t0 = time.perf_counter()
        rid = request.path_params["rollout"]
        try:
            state = await self.registry.authorize(rid, api_key(request))
            body = await read_json(request, self.config.limits.max_body_bytes)
            if api in WIRE:
                t = self.translate(state, api, body, request)
                dialect.validate(ApiKind.CHAT, t.chat)
                return await self._serve(state, ApiKind.CHAT, t.chat, t0, wire=(api, body, t))
            dialect.validate(api, body)
        except GatewayError as exc:
            return exc.response()
        return await self._serve(state, api, body, t0)

    def translate(self, state: RolloutState, api: ApiKind, body: Any, request: Request) -> Translation:
        if api == ApiKind.ANTHROPIC_MESSAGES:
            return anthropic.to_chat(body, request.headers.get("anthropic-beta"))
        previous = None
        prev_id = body.get("previous_response_id") if isinstance(body, dict) else None
        if prev_id is not None:
            if not isinstance(prev_id, str):
                raise BadRequest("'previous_response_id' must be a string")
            previous = state.responses.get(prev_id)
            if previous is None:
                raise BadRequest(f"previous_response_id {prev_id!r} is not known to this gateway: it keeps "
                                 f"the last {KEEP_RESPONSES} responses of a live rollout in memory; send the "
                                 "full input instead", code="unknown_previous_response")
        return responses.to_chat(body, previous)

    async def count_tokens(self, state: RolloutState, chat: dict) -> int:
        """Prompt tokens of a chat request: rendered exactly in gateway render mode, else the engine's
        ``/tokenize`` (vLLM), else an estimate (4 bytes a token)."""
        if self.renderer is not None and self.config.render_mode == "gateway":
            try:
                return len(self.renderer.render(state.id, chat).prompt_token_ids)
            except Exception:  # noqa: BLE001 - counting is advisory; fall back to the estimate
                return anthropic.count_estimate(chat)
        try:
            engine = self.pool.pick(state.id)
            body = {"messages": chat["messages"], **({"tools": chat["tools"]} if chat.get("tools") else {})}
            if engine.model:
                body["model"] = engine.model
            url = engine.base_url.removesuffix("/v1") + "/tokenize"
            resp = await self.pool.client.post(url, orjson.dumps(body))
            try:
                data = await resp.read()
            finally:
                resp.release()
            if resp.status == 200:
                count = orjson.loads(data).get("count")
                if type(count) is int:
                    return count
        except Exception:  # noqa: BLE001 - counting is advisory; fall back to the estimate
            log.debug("engine /tokenize unavailable; estimating the token count", exc_info=True)
        return anthropic.count_estimate(chat)

    def remember_response(self, state: RolloutState, t: Translation, obj: dict) -> None:
        state.responses[obj["id"]] = responses.conversation(t.chat, t.notes.get("conversation_start", 0), obj)
        while len(state.responses) > KEEP_RESPONSES:
            state.responses.pop(next(iter(state.responses)))

    async def _serve(self, state: RolloutState, api: ApiKind, body: dict, t0: float,
                     wire: tuple[ApiKind, dict, Translation] | None = None) -> Response:
        """Serve one validated call. ``wire``: the API and body the harness really used, when ``body`` is
        its chat translation (Anthropic Messages, Responses); the record keeps the harness's own request and
        response."""
        limits = self.config.limits
        rec_api, rec_body = (wire[0], wire[1]) if wire else (api, body)
        try:
            if state.calls >= limits.max_calls_per_rollout:
                raise LimitExceeded(
                    f"the rollout's call budget ({limits.max_calls_per_rollout} calls) is used up",
                    code="rollout_call_budget")
            plan = dialect.plan(api, body, self.config, self.config.engine_model,
                                limits.max_tokens_per_rollout - state.tokens, state.sampling)
        except LimitExceeded as exc:
            return await self._fail(state, rec_api, rec_body, {}, exc, self.gate.policy_version, None, t0)
        if self.config.render_mode == "gateway" and api == ApiKind.CHAT:
            from harnessrl.gateway.render_call import render_call

            return await render_call(self, state, body, plan, t0, wire)
        state.calls += 1  # reserved now so that concurrent calls cannot overrun the budget
        try:
            version = await self.gate.enter()
        except GatewayError as exc:
            state.calls -= 1
            return exc.response()
        relayed = False
        try:  # in flight until recorded: a drained pause means every answered call is in the store
            try:
                engine, resp = await self.open(state.id, api, plan)
            except GatewayError as exc:
                return await self._fail(state, rec_api, rec_body, plan.sampling, exc, version, None, t0)
            if plan.stream and wire is None:
                relayed = True  # the relay owns the pause-gate slot from here
                return Relay(self, state, api, body, plan, engine, resp, version, t0)
            try:
                data = await resp.read()
            except STREAM_ERRORS as exc:
                err = UpstreamError(f"engine {engine.id} failed while answering: {exc}", status=502)
                return await self._fail(state, rec_api, rec_body, plan.sampling, err, version, engine, t0)
            finally:
                resp.release()
                engine.outstanding -= 1
            return await self._answer(state, api, plan, data, version, engine, t0, rec_api, rec_body, wire)
        finally:
            if not relayed:
                self.gate.exit()

    async def _answer(self, state: RolloutState, api: ApiKind, plan: dialect.Plan, data: bytes, version: int,
                      engine: Engine, t0: float, rec_api: ApiKind, rec_body: dict,
                      wire: tuple[ApiKind, dict, Translation] | None) -> Response:
        """Record a complete engine answer, then give it to the harness."""
        out = orjson.loads(data)
        prompt, choices = dialect.extract(api, out)
        call = self._call(state, rec_api, rec_body, plan, prompt, choices, out.get("policy_version", version),
                          engine, t0)
        model = rec_body.get("model") or self.config.model_name
        events = b""
        if wire is not None:
            enc = encoder(rec_api, model, rec_body, wire[2])
            events = encode_complete(enc, out)
            out = call.response = enc.result()
            if wire[2].notes:
                call.sampling = {**call.sampling, "adjusted": wire[2].notes}
        else:
            out["model"] = model
            call.response = dialect.strip(out, plan.want_logprobs, plan.want_token_ids)
        try:
            index = await self.recorder.record(call)
        except RolloutClosed as exc:
            self.registry.mark_closed(state.id)
            return RolloutClosedError(str(exc)).response()
        self._account(state, prompt, choices)
        if rec_api == ApiKind.RESPONSES and wire is not None:
            self.remember_response(state, wire[2], out)
        headers = {"x-harnessrl-call-index": str(index)}
        if wire is not None and rec_body.get("stream"):
            return Response(events, media_type="text/event-stream", headers=headers)
        return Response(orjson.dumps(out), media_type="application/json", headers=headers)

    # -- engine selection with failover ------------------------------------------------------------------
    async def open(self, rid: str, api: ApiKind, plan: dialect.Plan,
                   exclude: set[Engine] | None = None) -> tuple[Engine, UpstreamResponse]:
        """Send the request to an engine, failing over while nothing has reached the harness.

        Returns the engine (its ``outstanding`` count taken) and a 200 response; raises otherwise.
        """
        tried: set[Engine] = set(exclude or ())
        last = ""
        while True:
            try:
                engine = self.pool.pick(rid, tried)
            except EngineUnavailable as exc:
                if last:
                    exc.message += f"; last error: {last}"
                raise
            if engine.model and not self.config.engine_model:
                plan.upstream["model"] = engine.model
            engine.outstanding += 1
            try:
                resp = await self.pool.post(engine, _PATHS[api], plan.upstream)
            except (TimeoutError, *CONNECT_ERRORS) as exc:
                engine.outstanding -= 1
                self.pool.mark_down(engine, f"{type(exc).__name__}: {exc}")
                tried.add(engine)
                last = f"{engine.id}: {type(exc).__name__}: {exc}"
                continue
            if resp.status == 200:
                engine.served += 1
                return engine, resp
            data = await resp.read()
            resp.release()
            engine.outstanding -= 1
            if resp.status == 400 and fit_context(plan, data):
                continue  # served with what the context has room for (recorded in the plan's sampling)
            if resp.status in RETRY_STATUSES:
                tried.add(engine)
                last = f"{engine.id}: HTTP {resp.status} {data[:200]!r}"
                if len(tried) < len(self.pool.engines):
                    continue
            raise _upstream_error(resp.status, data, engine)

    # -- recording helpers ----------------------------------------------------------------------------
    def _call(self, state: RolloutState, api: ApiKind, body: dict, plan: dialect.Plan, prompt: list[int],
              choices: list[ChoiceTokens], version: int, engine: Engine | None, t0: float,
              status: CallStatus = CallStatus.OK, error: str | None = None) -> NewCall:
        if prompt:
            fidelity, reason = classify_prompt(prompt, state.history)
        else:
            fidelity, reason = None, "the engine returned no prompt_token_ids"
        return NewCall(
            rollout_id=state.id, api=api, status=status, request=body, response=None,
            prompt_token_ids=prompt, choices=choices, policy_version=int(version),
            requested_model=body.get("model"), sampling=plan.sampling,
            engine_id=engine.id if engine else None, latency_s=time.perf_counter() - t0, error=error,
            fidelity=fidelity, fidelity_reason=reason,
        )

    def _account(self, state: RolloutState, prompt: list[int], choices: list[ChoiceTokens]) -> None:
        state.tokens += sum(len(c.token_ids) for c in choices)
        if prompt:
            for c in choices:
                state.history.append(prompt + c.token_ids)

    async def _fail(self, state: RolloutState, api: ApiKind, body: dict, sampling: dict,
                    exc: GatewayError, version: int, engine: Engine | None, t0: float,
                    prompt: list[int] | None = None, choices: list[ChoiceTokens] | None = None) -> Response:
        """Record a refused or failed call (limits, engine errors) and answer with its error."""
        call = NewCall(
            rollout_id=state.id, api=api, status=CallStatus.ERROR, request=body, response=exc.body(),
            prompt_token_ids=prompt or [], choices=choices or [], policy_version=int(version),
            requested_model=body.get("model"), sampling=sampling,
            engine_id=engine.id if engine else None, latency_s=time.perf_counter() - t0,
            error=f"{exc.status} {exc.code}: {exc.message}",
        )
        try:
            await self.recorder.record(call)
        except RolloutClosed as closed:
            self.registry.mark_closed(state.id)
            return RolloutClosedError(str(closed)).response()
        return exc.response()


_WINDOW = re.compile(rb"maximum context length is (\d+)")
_PROMPT = re.compile(rb"\((\d+) in the (?:messages|prompt)|has (\d+) input tokens|prompt has (\d+) tokens"
                     rb"|prompt \(length (\d+)\)")


def fit_context(plan: dialect.Plan, data: bytes) -> bool:
    """After an engine's context-length refusal: lower ``max_tokens`` to what the context has room for
    and return True (ask again), or raise a clear error when the prompt alone does not fit."""
    window, prompt = _WINDOW.search(data), _PROMPT.search(data)
    if window is None or prompt is None:
        return False
    size, plen = int(window.group(1)), int(next(g for g in prompt.groups() if g))
    room = size - plen
    if room < 1:
        raise LimitExceeded(
            f"the prompt has {plen} tokens but the model's context is {size} tokens, which leaves no room for "
            "an answer; shorten the conversation or serve a model with a longer context",
            code="context_length_exceeded")
    if plan.upstream.get("max_tokens", 0) <= room:
        return False  # not a max_tokens problem: pass the engine's own error on
    plan.sampling.setdefault("max_tokens_requested", plan.upstream.get("max_tokens"))
    plan.upstream["max_tokens"] = plan.sampling["max_tokens"] = plan.max_tokens = room
    return True


def _upstream_error(status: int, data: bytes, engine: Engine) -> UpstreamError:
    try:
        err = orjson.loads(data).get("error") or {}
        message = err.get("message") if isinstance(err, dict) else str(err)
    except (orjson.JSONDecodeError, AttributeError):
        err, message = {}, data[:500].decode(errors="replace")
    code = err.get("code") if isinstance(err, dict) else None
    out_status = status if 400 <= status < 500 else 502
    return UpstreamError(f"engine {engine.id} answered HTTP {status}: {message}", status=out_status,
                         code=str(code) if code is not None else "engine_error")
