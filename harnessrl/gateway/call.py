"""One harness model call, from request to record: the gateway's hot path.

``CallHandler.handle`` authorizes the request and parses its wire format into the internal request with
the API's translation module (``apis/``). The ``ModelCall`` it returns is the ASGI response that owns
everything after that, in order: limits, the pause gate, the engine hop (failing over while nothing has
reached the harness), the answer -- streamed in the API's own wire format as the engine samples it -- and
the record. Budgets, pausing and the store are handled here and only here.

The guarantee: a call is committed to the store before the harness receives the end of its answer (the
closing chunks or events of a stream are held until then), so a crash never loses a call whose answer a
harness saw. Limits are checked before the engine is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from array import array
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

import harnessrl.gateway.dialect as dialect
from harnessrl.gateway.apis import anthropic, chat, completions, encode_complete, gemini, responses
from harnessrl.gateway.apis.base import DONE, Translation
from harnessrl.gateway.config import GatewayConfig
from harnessrl.gateway.engine_hop import EngineHop, refused_in_band
from harnessrl.gateway.errors import (
    BadRequest,
    GatewayError,
    LimitExceeded,
    NotImplementedMode,
    RolloutClosedError,
    StoreUnavailable,
    UpstreamError,
)
from harnessrl.gateway.fidelity import classify_prompt, joined, pack
from harnessrl.gateway.http import api_key, read_json, send_json
from harnessrl.gateway.pause_gate import PauseGate
from harnessrl.gateway.pool import STREAM_ERRORS, Engine, EnginePool
from harnessrl.gateway.recorder import Recorder, RecorderClosed
from harnessrl.gateway.refusals import log_failed, log_refused, refused_call
from harnessrl.gateway.rollout_registry import RolloutRegistry, RolloutState
from harnessrl.gateway.stream import StreamAccumulator, sse_batches
from harnessrl.gateway.upstream import UpstreamResponse
from harnessrl.store.base import BudgetExceeded, NewCall, RolloutClosed
from harnessrl.store.codec import prepacked
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens

log = logging.getLogger(__name__)
PATHS = {ApiKind.CHAT: "/chat/completions", ApiKind.COMPLETIONS: "/completions"}
#: A call still being served after this long starts watching for its harness to leave (``_serve_while_connected``).
WATCH_AFTER_S = 0.2
#: Sampling fields copied into the token-level request of gateway render mode.
_RENDER_COPY = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                "repetition_penalty", "seed", "n", "max_tokens", "stop", "logit_bias")


@dataclass(slots=True)
class Services:
    """What a call needs from the gateway (built once by ``Gateway``)."""

    config: GatewayConfig
    pool: EnginePool
    recorder: Recorder
    registry: RolloutRegistry
    gate: PauseGate
    hop: EngineHop
    renderer: Any = None  # render.base.ChatRenderer in render_mode "gateway"
    router: Any = None  # policies.Router when the run has several policies


@dataclass(slots=True)
class Parsed:
    """A harness request in the gateway's terms."""

    api: ApiKind  # the API the harness spoke (and the record keeps)
    body: dict[str, Any]  # what it sent (recorded as is)
    internal: dict[str, Any]  # the chat or completions request served
    kind: ApiKind  # the internal request's dialect: CHAT or COMPLETIONS
    translation: Translation | None  # for Anthropic Messages and Responses
    stream: bool
    model: str  # the model name the harness is answered with
    policy: str | None = None  # the policy serving it (several policies only)


class CallHandler:
    """Entry of the harness routes: authorize, parse, and hand the call to a ``ModelCall``."""

    def __init__(self, services: Services) -> None:
        self.s = services

    async def handle(self, request: Request, api: ApiKind) -> Any:
        t0 = time.perf_counter()
        try:
            state = await self.s.registry.authorize(request.path_params["rollout"], api_key(request))
        except GatewayError as exc:  # no rollout to record it on: logged only
            log_refused(request, request.path_params["rollout"], exc)
            return error_response(exc, api)
        try:
            body = await read_json(request, self.s.config.limits.max_body_bytes)
        except GatewayError as exc:
            return await self.refuse(request, api, state, None, exc, t0)
        return await self.serve(request, api, state, body, t0)

    async def serve(self, request: Request, api: ApiKind, state: RolloutState, body: Any, t0: float) -> Any:
        """A call whose rollout is known and authorized: a rollout route's, or a production session's."""
        try:
            if api == ApiKind.RESPONSES:
                await self._recall_previous(state, body)
            parsed = self.parse(state, api, body, request)
            if self.s.router is not None:
                parsed.policy = route_policy(self.s.router, body, request.headers)
        except GatewayError as exc:
            return await self.refuse(request, api, state, body, exc, t0)
        return ModelCall(self.s, state, parsed, t0)

    async def refuse(self, request: Request, api: ApiKind, state: RolloutState, body: Any, exc: GatewayError,
                     t0: float) -> Response:
        """A call refused before it was served: logged, recorded on its rollout, answered in the API's shape."""
        await self.record_refused(request, api, state, body, exc, t0)
        return error_response(exc, api)

    async def record_refused(self, request: Request, api: ApiKind, state: RolloutState, body: Any,
                             exc: GatewayError, t0: float) -> None:
        """Log a refusal and record it on its rollout (the store's own failure is logged by the recorder)."""
        log_refused(request, state.id, exc)
        if state.record:
            route = f"{request.method} {request.url.path}"
            path_model = request.path_params.get("model") if api == ApiKind.GEMINI else None
            call = refused_call(state.id, api, body, exc, self.s.gate.policy_version, time.perf_counter() - t0,
                                route, model=path_model)
            with contextlib.suppress(RolloutClosed, StoreUnavailable, RecorderClosed):
                await self.s.recorder.record(call)  # the harness hears its own error, not the store's

    def parse(self, state: RolloutState, api: ApiKind, body: Any, request: Request) -> Parsed:
        if api in (ApiKind.CHAT, ApiKind.COMPLETIONS):
            if api == ApiKind.CHAT:
                chat.validate(body, self.s.config.images == "pass")
            else:
                completions.validate(body)
            return Parsed(api, body, body, api, None, bool(body.get("stream")),
                          body.get("model") or self.s.config.model_name)
        t = self.translate(state, api, body, request)
        chat.validate(t.chat, t.images)
        model = t.chat.get("model") or self.s.config.model_name  # the body's, or the path's (Gemini)
        stream = t.chat.get("stream", body.get("stream")) is True
        if stream:
            t.chat["stream"] = True  # the engine streams; the API's encoder translates as tokens arrive
        return Parsed(api, body, t.chat, ApiKind.CHAT, t, stream, model)

    def translate(self, state: RolloutState, api: ApiKind, body: Any, request: Request) -> Translation:
        images = self.s.config.images == "pass"
        if api == ApiKind.ANTHROPIC_MESSAGES:
            return anthropic.to_chat(body, request.headers.get("anthropic-beta"), images)
        if api == ApiKind.GEMINI:
            return gemini.from_route(body, request, images)
        previous = None
        prev_id = body.get("previous_response_id") if isinstance(body, dict) else None
        if prev_id is not None:
            if not isinstance(prev_id, str):
                raise BadRequest("'previous_response_id' must be a string")
            previous = responses.kept_conversation(state.responses, prev_id)
            if previous is None:
                raise BadRequest(f"previous_response_id {prev_id!r} is not a response this rollout was given; "
                                 "send the full input instead", code="unknown_previous_response")
        return responses.to_chat(body, previous, images)

    async def _recall_previous(self, state: RolloutState, body: Any) -> None:
        """A ``previous_response_id`` no longer kept in memory: its conversation read back from the store."""
        prev = body.get("previous_response_id") if isinstance(body, dict) else None
        if not isinstance(prev, str) or prev in state.responses or not state.record:
            return
        budget = self.s.config.limits.max_recall_bytes  # each read-back reads every call: bounded per rollout
        if state.recalled_bytes >= budget:
            raise responses.recall_refused(prev, state.recalled_bytes, budget)
        try:
            calls = await asyncio.to_thread(self.s.registry.read_calls, state.id)
        except Exception as exc:  # noqa: BLE001 - the store failed: the harness may retry
            raise StoreUnavailable(f"previous_response_id {prev!r} is read back from the store, which failed "
                                   f"({type(exc).__name__}: {exc}); retry the call") from None
        state.recalled_bytes += responses.recorded_bytes(calls)
        conversation = responses.rebuild_conversation(calls, prev)
        if conversation is not None:
            responses.keep_conversation(state.responses, prev, conversation)

    def reload(self, state: RolloutState, calls: list[Call]) -> None:
        """A live rollout's memory after a gateway restart: the responses ``previous_response_id`` may name,
        and the renderer's token history -- fed every call as the chat call it was served as."""
        chat_calls: list[Call] = []
        built: dict[str, list[dict[str, Any]]] = {}  # every response's conversation, while rebuilding
        for call in sorted(calls, key=lambda c: c.index):
            if call.api == ApiKind.CHAT:
                chat_calls.append(call)
            elif call.api != ApiKind.COMPLETIONS and call.status == CallStatus.OK and call.response:
                try:
                    chat_calls.append(self._as_chat_call(built, call))
                except (GatewayError, KeyError, TypeError, ValueError):
                    continue  # an answer we cannot read back: the next prompt is rendered afresh
        for response_id in list(built)[-responses.KEEP_CONVERSATIONS:]:  # the latest stay in memory
            responses.keep_conversation(state.responses, response_id, built[response_id])
        renderer = self.s.renderer
        if renderer is not None and hasattr(renderer, "load"):
            renderer.load(state.id, chat_calls)

    def _as_chat_call(self, built: dict[str, list[dict[str, Any]]], call: Call) -> Call:
        """A translated call as the chat call the policy served (its message as the harness sends it back);
        a Responses call's conversation is added to ``built``."""
        resp = call.response or {}
        images = self.s.config.images == "pass"  # a call served with images is read back with them
        if call.api == ApiKind.ANTHROPIC_MESSAGES:
            chat_body = anthropic.to_chat(call.request, images=images).chat
            history = anthropic.to_chat({"messages": [{"role": "user", "content": "-"},
                                                      {"role": "assistant", "content": resp["content"]}]})
            message = history.chat["messages"][-1]
        elif call.api == ApiKind.GEMINI:
            chat_body = gemini.to_chat(call.request, call.requested_model, images=images).chat
            message = gemini.answered_message(resp)
        else:
            prev = call.request.get("previous_response_id")
            t = responses.to_chat(call.request, built.get(prev) if isinstance(prev, str) else None, images)
            chat_body = t.chat
            conversation = built[resp["id"]] = responses.conversation(t.chat, t.notes.get("conversation_start", 0),
                                                                      resp)
            message = conversation[-1]
        choice = {"index": 0, "message": message, "finish_reason": call.choices[0].finish_reason if call.choices
                  else "stop"}
        return dataclasses.replace(call, api=ApiKind.CHAT, request=chat_body, response={"choices": [choice]})

    async def count_tokens(self, state: RolloutState, chat_body: dict) -> int:
        """Prompt tokens of a chat request: rendered exactly in gateway render mode, else the engine's
        ``/tokenize`` (vLLM), else an estimate (4 bytes a token). Not a sampled call: not recorded."""
        if self.s.renderer is not None and self.s.config.render_mode == "gateway":
            try:
                return len(self.s.renderer.render(state.id, chat_body).prompt_token_ids)
            except Exception:  # noqa: BLE001 - counting is advisory; fall back to the estimate
                return anthropic.count_estimate(chat_body)
        try:
            engine = self.s.pool.pick(state.id)
            body = {"messages": chat_body["messages"]}
            if chat_body.get("tools"):
                body["tools"] = chat_body["tools"]
            if engine.model:
                body["model"] = engine.model
            resp = await self.s.pool.client.post(engine.root + "/tokenize", orjson.dumps(body))
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
        return anthropic.count_estimate(chat_body)


class _StreamFailed(Exception):
    """The engine stream broke (an error event, bad data, or it ended without ``[DONE]``)."""


class ModelCall:
    """The lifecycle of one call (an ASGI app, so that cleanup runs even if it is never iterated)."""

    def __init__(self, services: Services, state: RolloutState, parsed: Parsed, t0: float) -> None:
        self.s, self.state, self.p, self.t0 = services, state, parsed, t0
        #: A production session not sampled for recording is served the same way, and stored nowhere.
        self.recorder: Recorder | _Unrecorded = services.recorder if state.record else _UNRECORDED
        self.plan: dialect.Plan | None = None
        self.version = services.gate.policy_version
        self.engine: Engine | None = None
        self.rendered: Any = None  # the renderer's prompt in gateway render mode
        self._send: Any = None
        self._started = False  # response headers sent
        self._sent = False  # answer bytes reached the harness: no failover from then on

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self._send, self._scope = send, scope
        s, state, limits = self.s, self.state, self.s.config.limits
        try:
            if state.calls >= limits.max_calls_per_rollout:
                raise LimitExceeded(f"the rollout's call budget ({limits.max_calls_per_rollout} calls) is used up",
                                    code="rollout_call_budget")
            self.plan = dialect.plan(self.p.kind, self.p.internal, s.config, s.config.engine_model,
                                     limits.max_tokens_per_rollout - state.tokens, state.sampling,
                                     s.pool.context_window)
        except LimitExceeded as exc:
            return await self._fail(exc, status=CallStatus.REFUSED)
        plan = self.plan
        if s.config.render_mode == "gateway" and self.p.kind == ApiKind.CHAT:
            try:
                plan = self._render()
            except GatewayError as exc:
                return await self._fail(exc, status=CallStatus.REFUSED)
        state.calls += 1  # reserved now so that concurrent calls cannot overrun the budget
        try:
            self.version = await s.gate.enter()
            # The model and the version are read together, after the gate: a call that waited through an
            # update goes to the model that update switched to, as its stamp says (no await in between).
            if s.config.engine_model is not None:
                plan.upstream["model"] = s.config.engine_model
            if self.p.policy is not None:
                plan = self._route(plan)
                self.version = s.router.versions[self.p.policy]
            if state.engine_model is not None:  # a production session on an arm with its own model
                plan = _pin_model(plan, state.engine_model)
            if state.version is not None:
                self.version = state.version
        except BaseException as exc:  # paused too long, or the client left while waiting: no call made
            state.calls -= 1
            if isinstance(exc, GatewayError):
                return await self._fail(exc, status=CallStatus.REFUSED)
            raise
        try:  # in flight until recorded: a drained pause means every answered call is in the store
            await self._serve_while_connected(plan, receive)
        except (asyncio.CancelledError, Exception) as exc:
            if not self._recorded:  # keep what was sampled, even when the answer could not be finished
                cancelled = isinstance(exc, asyncio.CancelledError)
                acc = self._acc
                call = self._new_call(acc.prompt() if acc else [], acc.choices() if acc else [], None, self.version,
                                      CallStatus.CANCELLED if cancelled else CallStatus.ERROR,
                                      "client went away" if cancelled else f"gateway error: {exc!r}")
                self.recorder.record_nowait(call)
            raise
        finally:
            s.gate.exit()

    async def _serve_while_connected(self, plan: dialect.Plan, receive: Any) -> None:
        """Serve the call unless the harness goes away first (killed at its time limit): then the engine
        request is cancelled and the call recorded as cancelled at once -- with how long it waited -- not
        whenever the engine would have answered (after the controller has closed the rollout). The call is
        served in this task; a watcher task cancels it if the harness leaves (one task, not two and a wait).
        The watcher starts once the call has taken ``WATCH_AFTER_S``: a short call never needs one (a task
        per call, ~3% of a fast call's CPU), and a harness that left meanwhile is seen as soon as it starts."""
        task = asyncio.current_task()
        assert task is not None
        serving, left = True, False
        gone: asyncio.Future | None = None

        def on_gone(gone: asyncio.Future) -> None:
            nonlocal left
            if serving and not gone.cancelled():
                left = True
                task.cancel()

        def watch() -> None:
            nonlocal gone
            gone = asyncio.ensure_future(_disconnected(receive))
            gone.add_done_callback(on_gone)

        timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, watch)
        try:
            await self._serve(plan)
        except asyncio.CancelledError:
            if not self._recorded:
                self._recorded = True
                acc = self._acc
                self.recorder.record_nowait(self._new_call(
                    acc.prompt() if acc else [], acc.choices() if acc else [], None, self.version,
                    CallStatus.CANCELLED, "client went away while the call was served"))
            if not left or task.uncancel() > 0:
                raise  # cancelled from outside, not by the harness leaving
        finally:
            serving = False
            timer.cancel()
            if gone is not None:
                gone.cancel()

    def _render(self) -> dialect.Plan:
        """Gateway render mode: the prompt's token ids from the renderer, sent to the engine's /completions."""
        renderer = self.s.renderer
        if renderer is None:
            raise NotImplementedMode(
                "render_mode 'gateway' needs harnessrl.gateway.render (token-exact chat rendering), which is "
                "not available; use render_mode 'engine'")
        try:
            self.rendered = renderer.render(self.state.id, self.p.internal)
        except GatewayError:
            raise
        except Exception as exc:  # noqa: BLE001 - a template failure is the request's problem
            raise GatewayError(f"cannot render this chat request: {exc}", code="render_failed") from None
        plan = self.plan
        assert plan is not None
        up: dict[str, Any] = {k: plan.upstream[k] for k in _RENDER_COPY if k in plan.upstream}
        up.update(model=self.s.config.engine_model, prompt=list(self.rendered.prompt_token_ids),
                  return_token_ids=True, logprobs=(self.p.internal.get("top_logprobs") or 0))
        if self.rendered.stop_token_ids:
            up["stop_token_ids"] = list(self.rendered.stop_token_ids)
        window = self.s.pool.context_window
        if "max_tokens" not in up and window is not None:  # /completions would default to 16: the room left
            up["max_tokens"] = plan.sampling["max_tokens"] = max(1, window - len(self.rendered.prompt_token_ids))
        stream = self.p.stream and plan.n == 1  # several choices: answered once all are sampled
        up["stream"] = stream
        return dialect.Plan(upstream=up, sampling=plan.sampling, stream=stream, want_logprobs=False,
                            want_token_ids=False, max_tokens=up.get("max_tokens"), n=plan.n, asked=plan.asked)

    def _route(self, plan: dialect.Plan) -> dialect.Plan:
        """Several policies: the engine request names this call's policy model (its adapter)."""
        model = self.s.router.engine_models.get(self.p.policy)
        return plan if model is None else _pin_model(plan, model)

    async def _serve(self, plan: dialect.Plan) -> None:
        path = PATHS[ApiKind.COMPLETIONS if self.rendered is not None else self.p.kind]
        tried: set[Engine] = set()
        while True:
            try:
                engine, resp = await self.s.hop.open(self.state.id, path, plan, exclude=tried)
            except GatewayError as exc:
                return await self._fail(exc)
            self.engine = engine
            model = plan.upstream.get("model")
            counts = self.s.pool.in_flight_models
            if isinstance(model, str):
                counts[model] = counts.get(model, 0) + 1
            try:
                if not plan.stream:
                    return await self._complete(resp)
                try:
                    return await self._stream(resp)
                except GatewayError as exc:  # refused in-band: the request's error (4xx), not the engine's
                    return await self._fail(exc, self._acc)
                except (*STREAM_ERRORS, _StreamFailed) as exc:
                    why = f"engine {engine.id} failed mid-stream: {type(exc).__name__}: {exc}"
                    if self._sent:
                        return await self._fail(UpstreamError(why, status=502), self._acc)
                    self.s.pool.mark_down(engine, why)  # nothing reached the harness: ask another engine
                    tried.add(engine)
            finally:
                resp.release()
                engine.outstanding -= 1
                if isinstance(model, str):
                    if counts[model] <= 1:
                        del counts[model]
                    else:
                        counts[model] -= 1

    # -- a complete answer ----------------------------------------------------------------------------
    async def _complete(self, resp: UpstreamResponse) -> None:
        try:
            data = await resp.read()
            out = orjson.loads(data)
        except (*STREAM_ERRORS, orjson.JSONDecodeError) as exc:
            assert self.engine is not None
            return await self._fail(UpstreamError(f"engine {self.engine.id} failed while answering: {exc}",
                                                  status=502))
        p = self.p
        version = out.get("policy_version", self.version)
        self._versions = dialect.token_versions(out)
        if self.rendered is not None:
            prompt, choices, answer = self._parse_rendered(out)
        else:
            prompt, choices = dialect.extract(p.kind, out)
            answer = out
        media_type = "text/event-stream"
        if p.translation is not None:
            enc = self._encoder()
            events = encode_complete(enc, answer)
            response = enc.result()
            media_type = getattr(enc, "content_type", b"text/event-stream").decode()
        else:
            answer["model"] = p.model
            response = chat.strip(answer, self.plan.want_logprobs, self.plan.want_token_ids) \
                if self.rendered is None else answer
            events = chat.synth_stream(response, p.internal) if p.stream else b""
        index = await self._record(prompt, choices, response, version)
        if index is None:
            return
        headers = {"x-harnessrl-call-index": str(index)} if self.state.record else {}
        if p.stream:
            await Response(events, media_type=media_type, headers=headers)(self._scope, None, self._send)
        else:
            await send_json(self._send, orjson.dumps(response), [(k.encode(), v.encode()) for k, v in headers.items()])

    def _parse_rendered(self, out: dict) -> tuple[list[int], list[ChoiceTokens], dict]:
        """The chat answer for the sampled tokens of a rendered prompt (gateway render mode)."""
        renderer, rid = self.s.renderer, self.state.id
        _, comp = dialect.extract(ApiKind.COMPLETIONS, out)
        prompt = list(self.rendered.prompt_token_ids)
        choices, tokens = [], []
        for i, ch in enumerate(comp):
            message, finish = renderer.parse(rid, ch.token_ids, ch.finish_reason or "stop")
            if i == 0:
                renderer.remember(rid, self.p.internal, self.rendered, ch.token_ids, message)
            lp = _chat_logprobs(out, i) if self.p.internal.get("logprobs") else None
            choices.append({"index": i, "message": message, "finish_reason": finish, "logprobs": lp})
            tokens.append(ChoiceTokens(ch.token_ids, ch.logprobs, finish))
        n_out = sum(len(c.token_ids) for c in comp)
        answer = {"id": f"chatcmpl-{out.get('id', '')}", "object": "chat.completion", "created": int(time.time()),
                  "model": self.p.model, "choices": choices,
                  "usage": {"prompt_tokens": len(prompt), "completion_tokens": n_out,
                            "total_tokens": len(prompt) + n_out}}
        return prompt, tokens, answer

    # -- a streamed answer ----------------------------------------------------------------------------
    async def _stream(self, resp: UpstreamResponse) -> None:
        p = self.p
        rendered = self.rendered is not None
        acc = self._acc = StreamAccumulator(ApiKind.COMPLETIONS if rendered else p.kind)
        passthrough = None if rendered or p.translation is not None else \
            chat.Passthrough(p.model, self.plan.want_logprobs, self.plan.want_token_ids)
        enc = self._enc = None if passthrough is not None else self._encoder()
        parser = self.s.renderer.stream_parse(self.state.id) if rendered else None
        opened = done = False
        async for batch in sse_batches(resp):  # the events that arrived together go out in one write
            out = b""
            try:
                for data in batch:
                    if data == DONE:
                        done = True
                        break
                    try:
                        chunk = orjson.loads(data)
                    except orjson.JSONDecodeError as exc:
                        raise _StreamFailed(f"the engine sent malformed data: {exc}") from None
                    if not isinstance(chunk, dict) or ("error" in chunk and not chunk.get("choices")):
                        assert self.engine is not None and self.plan is not None
                        raise refused_in_band(chunk, self.engine, self.plan) \
                            or _StreamFailed(str(chunk.get("error") if isinstance(chunk, dict) else chunk))
                    acc.add(chunk)
                    if passthrough is not None:
                        out += passthrough.chunk(chunk)
                        continue
                    if not opened:
                        opened = True
                        out += enc.start(len(self.rendered.prompt_token_ids) if rendered else len(acc.prompt()))
                    for ch in chunk.get("choices") or ():
                        if ch.get("index", 0) != 0:
                            continue  # the translated APIs and the incremental parse serve one choice
                        if parser is not None:
                            out += enc.feed(parser.add(ch.get("token_ids") or []))
                        else:
                            out += enc.feed(ch.get("delta") or {})
            except Exception:
                if out:  # what came before the bad event reaches the harness, as it would have one by one
                    await self._emit(out)
                raise
            if out:
                await self._emit(out)
            if done:
                break
        else:
            raise _StreamFailed("the engine closed the stream before [DONE]")
        prompt, choices = acc.prompt(), acc.choices()
        self._versions = acc.token_versions()
        version = acc.policy_version if acc.policy_version is not None else self.version
        if passthrough is not None:
            response = acc.response()
            response["model"] = p.model
            tail = passthrough.tail()
        else:
            if not opened:
                await self._emit(enc.start(len(prompt)))
            first = choices[0] if choices else ChoiceTokens([], [], "stop")
            finish = first.finish_reason
            if parser is not None:
                message, finish, delta = parser.finish(finish or "stop")
                await self._emit(enc.feed(delta))
                prompt = list(self.rendered.prompt_token_ids)
                choices = [ChoiceTokens(c.token_ids, c.logprobs, finish if i == 0 else c.finish_reason)
                           for i, c in enumerate(choices)]
            tail = enc.finish(finish, acc.stop_reason(0), len(prompt), len(first.token_ids))
            response = enc.result()
            if parser is not None:  # remember what the harness got, with the exact sampled tokens
                self.s.renderer.remember(self.state.id, p.internal, self.rendered, first.token_ids, message)
        if await self._record(prompt, choices, response, version) is not None:
            await self._emit(tail, more=False)

    async def _emit(self, body: bytes, more: bool = True) -> None:
        if not self._started:
            self._started = True
            kind = getattr(self._enc, "content_type", b"text/event-stream")  # Gemini's JSON array: JSON
            await self._send({"type": "http.response.start", "status": 200,
                              "headers": [(b"content-type", kind), (b"cache-control", b"no-cache")]})
        self._sent = self._sent or bool(body)
        await self._send({"type": "http.response.body", "body": body, "more_body": more})

    def _encoder(self) -> Any:
        p = self.p
        if p.api == ApiKind.ANTHROPIC_MESSAGES:
            return anthropic.MessageEncoder(p.model)
        if p.api == ApiKind.RESPONSES:
            assert p.translation is not None
            return responses.ResponseEncoder(p.model, p.body, p.translation.names)
        if p.api == ApiKind.GEMINI:
            return gemini.ContentEncoder(p.model, sse=getattr(p.translation, "sse", True))
        return chat.ChatEncoder(p.model, bool((p.internal.get("stream_options") or {}).get("include_usage")))

    # -- recording ------------------------------------------------------------------------------------
    def _new_call(self, prompt: list[int], choices: list[ChoiceTokens], response: dict | None, version: int,
                  status: CallStatus = CallStatus.OK, error: str | None = None) -> NewCall:
        p, plan = self.p, self.plan
        sampling = dict(plan.sampling) if plan is not None else {}
        if p.translation is not None and p.translation.notes:
            sampling["adjusted"] = p.translation.notes
        if p.policy is not None:
            sampling["policy"] = p.policy
        if any(len(runs) > 1 for runs in self._versions):  # sampled across a weight update ("continue")
            sampling["token_versions"] = self._versions
        if self.s.config.images == "pass":  # images reached the engine: recorded, and kept out of training
            n = p.translation.notes.get("images", 0) if p.translation is not None else _chat_images(p.body)
            if n:
                sampling["images"] = n
        self._packed = packed = pack(prompt) if prompt else None  # once: the verdict, the history, the store
        if self.rendered is not None:
            fidelity, reason = self.rendered.fidelity, self.rendered.fidelity_reason
        elif packed is not None:
            fidelity, reason = classify_prompt(packed, self.state.history)
        else:
            fidelity, reason = None, "the engine returned no prompt_token_ids"
        return NewCall(rollout_id=self.state.id, api=p.api, status=status, request=p.body, response=response,
                       prompt_token_ids=prompt, choices=choices, policy_version=int(version),
                       requested_model=p.internal.get("model") if isinstance(p.internal.get("model"), str) else None,
                       sampling=sampling, engine_id=self.engine.id if self.engine else None,
                       latency_s=time.perf_counter() - self.t0, error=error, fidelity=fidelity,
                       fidelity_reason=reason, packed_prompt=prepacked(prompt, packed))

    async def _record(self, prompt: list[int], choices: list[ChoiceTokens], response: dict,
                      version: int) -> int | None:
        """Commit the answered call; None (and the harness told) when its rollout closed meanwhile."""
        call = self._new_call(prompt, choices, response, version)
        limits = self.s.config.limits  # checked again by a store that other gateways share
        call.max_calls, call.max_tokens = limits.max_calls_per_rollout, limits.max_tokens_per_rollout
        self._recorded = True  # committed even if the client goes away while we wait (it is queued already)
        try:
            index = await self.recorder.record(call)
        except RolloutClosed as exc:
            self.s.registry.mark_closed(self.state.id)
            await self._respond_error(RolloutClosedError(str(exc)))
            return None
        except BudgetExceeded as exc:  # another gateway used the rollout's budget up meanwhile
            if exc.kind == "calls":  # refuse the next calls up front
                self.state.calls = max(self.state.calls, limits.max_calls_per_rollout)
            else:
                self.state.tokens = max(self.state.tokens, limits.max_tokens_per_rollout)
            self._recorded = False
            await self._fail(LimitExceeded(str(exc), code=f"rollout_{exc.kind[:-1]}_budget"))
            return None
        except StoreUnavailable as exc:  # disk full, database down: refused, not half-answered
            self.state.calls -= 1
            await self._respond_error(exc)
            return None
        state = self.state
        state.tokens += sum(len(c.token_ids) for c in choices)
        if prompt and self.rendered is None:
            assert self._packed is not None  # _new_call packed this prompt
            for c in choices:
                state.history.append(joined(self._packed, pack(c.token_ids)))
        if self.p.api == ApiKind.RESPONSES and self.p.translation is not None:
            t = self.p.translation
            responses.keep_conversation(state.responses, response["id"],
                                        responses.conversation(t.chat, t.notes.get("conversation_start", 0), response))
        return index

    _acc: StreamAccumulator | None = None
    _packed: array | None = None  # the prompt's token IDs packed (fidelity.pack), once per call
    _enc: Any = None
    _recorded = False
    #: Per choice, run-length ``[[policy version, tokens], ...]`` of who sampled each token (embedded engine).
    _versions: list[list[list[int]]] = []

    async def _fail(self, exc: GatewayError, acc: StreamAccumulator | None = None,
                    status: CallStatus = CallStatus.ERROR) -> None:
        """Record a failed call (engine errors; ``refused``: limits, rendering, the pause, before the engine
        was asked) and tell the harness."""
        log_failed(self.state.id, self._scope.get("method", "POST"), self._scope.get("path", ""), exc,
                   "refused" if status == CallStatus.REFUSED else "failed")
        prompt, choices = (acc.prompt(), acc.choices()) if acc is not None else ([], [])
        call = self._new_call(prompt, choices, exc.body(), self.version, status,
                              f"{exc.status} {exc.code}: {exc.message}")
        self._recorded = True
        try:
            await self.recorder.record(call)
        except RolloutClosed as closed:
            self.s.registry.mark_closed(self.state.id)
            exc = RolloutClosedError(str(closed))
        except StoreUnavailable:
            pass  # the harness hears the call's own error; the store's is logged by the recorder
        await self._respond_error(exc)

    async def _respond_error(self, exc: GatewayError) -> None:
        if not self._started:
            await error_response(exc, self.p.api)(self._scope, None, self._send)
            return
        if self._enc is not None:  # in-band, in the API's own event format
            payload = self._enc.error_event(exc.message)
        else:
            payload = chat.Passthrough.error_event(exc)
        await self._send({"type": "http.response.body", "body": payload, "more_body": False})


class _Unrecorded:
    """The recorder of a production session not sampled for recording: the call is served, not stored."""

    async def record(self, call: NewCall) -> int:
        return -1

    def record_nowait(self, call: NewCall) -> None:
        pass


_UNRECORDED = _Unrecorded()


def _chat_images(body: dict[str, Any]) -> int:
    """How many image parts a chat request's messages carry."""
    return sum(1 for m in body.get("messages") or () if isinstance(m.get("content"), list)
               for part in m["content"] if part.get("type") == "image_url")


def _pin_model(plan: dialect.Plan, model: str) -> dialect.Plan:
    """The engine request names ``model`` (a policy's or an arm's adapter) whatever the harness asked."""
    plan.upstream["model"] = model
    return dataclasses.replace(plan, pinned_model=True)


def error_response(exc: GatewayError, api: ApiKind) -> Response:
    """The error in the API's own shape: Anthropic's for the Messages API, Google's for Gemini, OpenAI's
    otherwise."""
    if api == ApiKind.ANTHROPIC_MESSAGES:
        body = anthropic.error_body(exc.status, exc.message, exc.code)
    elif api == ApiKind.GEMINI:
        body = gemini.error_body(exc.status, exc.message, exc.code)
    else:
        return exc.response()
    return Response(orjson.dumps(body), status_code=exc.status, media_type="application/json")


async def _disconnected(receive: Any) -> None:
    """Returns when the client has disconnected (the request body was read before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _chat_logprobs(out: dict, i: int) -> dict:
    lp = (out["choices"][i].get("logprobs") or {})
    toks, vals = lp.get("tokens") or [], lp.get("token_logprobs") or []
    return {"content": [{"token": t, "logprob": v, "bytes": None, "top_logprobs": []}
                        for t, v in zip(toks, vals, strict=False)]}


def route_policy(router: Any, body: Any, headers: Any) -> str:
    """The policy of a call (several policies): refused as an unknown model (404) when nothing routes it."""
    from harnessrl.policies.routing import RoutingRefused

    model = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else None
    try:
        return router.route(model, headers)
    except RoutingRefused as exc:
        raise GatewayError(str(exc), status=404, code="model_not_found") from None
