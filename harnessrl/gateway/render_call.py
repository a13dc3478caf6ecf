"""A chat call in token-exact mode: render -> engine /completions with token ids -> parse -> respond.

The renderer (see ``render_seam``) owns the chat template; this module only moves tokens and builds the
chat-shaped answer. A streamed request is answered with a synthesized stream after the call is recorded.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from starlette.responses import Response

from harnessrl.gateway import dialect
from harnessrl.gateway.errors import GatewayError, NotImplementedMode, RolloutClosedError, UpstreamError
from harnessrl.gateway.pool import STREAM_ERRORS
from harnessrl.gateway.rollouts import RolloutState
from harnessrl.store.base import NewCall, RolloutClosed
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

if TYPE_CHECKING:
    from harnessrl.gateway.proxy import Proxy

_COPY = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
         "repetition_penalty", "seed", "n", "max_tokens", "stop", "logit_bias")


async def render_call(proxy: Proxy, state: RolloutState, body: dict, plan: dialect.Plan, t0: float,
                      wire: tuple[ApiKind, dict, Any] | None = None) -> Response:
    """Serve a chat ``body`` token-exactly; ``wire`` as in ``Proxy._serve`` (Anthropic / Responses)."""
    renderer = proxy.renderer
    if renderer is None:
        return NotImplementedMode(
            "render_mode 'gateway' needs harnessrl.gateway.render (token-exact chat rendering), which is "
            "not available; use render_mode 'engine'").response()
    try:
        rendered = renderer.render(state.id, body)
    except GatewayError as exc:
        return exc.response()
    except Exception as exc:  # noqa: BLE001 - a template failure is the request's problem
        return GatewayError(f"cannot render this chat request: {exc}", code="render_failed").response()
    up: dict[str, Any] = {k: plan.upstream[k] for k in _COPY if k in plan.upstream}
    up.update(model=proxy.config.engine_model, prompt=list(rendered.prompt_token_ids),
              return_token_ids=True, logprobs=(body.get("top_logprobs") or 0), stream=False)
    if rendered.stop_token_ids:
        up["stop_token_ids"] = list(rendered.stop_token_ids)
    comp_plan = dialect.Plan(upstream=up, sampling=plan.sampling, stream=False, want_logprobs=False,
                             want_token_ids=False, max_tokens=plan.max_tokens, n=plan.n)
    state.calls += 1
    try:
        version = await proxy.gate.enter()
    except GatewayError as exc:
        state.calls -= 1
        return exc.response()
    try:  # in flight until recorded (see Proxy._serve)
        return await _complete(proxy, renderer, state, body, plan, rendered, comp_plan, version, t0, wire)
    finally:
        proxy.gate.exit()


async def _complete(proxy: Proxy, renderer: Any, state: RolloutState, body: dict, plan: dialect.Plan,
                    rendered: Any, comp_plan: dialect.Plan, version: int, t0: float,
                    wire: tuple[ApiKind, dict, Any] | None) -> Response:
    from harnessrl.gateway.apis import encode_complete
    from harnessrl.gateway.proxy import encoder

    rec_api, rec_body = (wire[0], wire[1]) if wire else (ApiKind.CHAT, body)
    engine = None
    try:
        engine, resp = await proxy.open(state.id, ApiKind.COMPLETIONS, comp_plan)
        try:
            out = orjson.loads(await resp.read())
        finally:
            resp.release()
            engine.outstanding -= 1
    except GatewayError as exc:
        return await proxy._fail(state, rec_api, rec_body, plan.sampling, exc, version, engine, t0)
    except STREAM_ERRORS as exc:
        err = UpstreamError(f"engine failed while answering: {exc}", status=502)
        return await proxy._fail(state, rec_api, rec_body, plan.sampling, err, version, engine, t0)
    _, comp_choices = dialect.extract(ApiKind.COMPLETIONS, out)
    prompt = list(rendered.prompt_token_ids)
    choices, tokens_lp, messages = [], [], []
    for i, ch in enumerate(comp_choices):
        message, finish = renderer.parse(state.id, ch.token_ids, ch.finish_reason or "stop")
        messages.append(message)
        choices.append({"index": i, "message": message, "finish_reason": finish,
                        "logprobs": _chat_logprobs(out, i) if body.get("logprobs") else None})
        tokens_lp.append(ChoiceTokens(ch.token_ids, ch.logprobs, finish))
    if comp_choices:
        renderer.remember(state.id, body, rendered, comp_choices[0].token_ids, messages[0])
    n_out = sum(len(c.token_ids) for c in comp_choices)
    model = rec_body.get("model") or proxy.config.model_name
    resp_obj = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": choices,
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": n_out,
                          "total_tokens": len(prompt) + n_out}}
    events = b""
    if wire is not None:
        enc = encoder(rec_api, model, rec_body, wire[2])
        events = encode_complete(enc, resp_obj)
        resp_obj = enc.result()
    sampling = {**plan.sampling, "adjusted": wire[2].notes} if wire is not None and wire[2].notes else plan.sampling
    call = NewCall(rollout_id=state.id, api=rec_api, status=CallStatus.OK, request=rec_body, response=resp_obj,
                   prompt_token_ids=prompt, choices=tokens_lp,
                   policy_version=int(out.get("policy_version", version)), requested_model=rec_body.get("model"),
                   sampling=sampling, engine_id=engine.id if engine else None,
                   latency_s=time.perf_counter() - t0, fidelity=rendered.fidelity,
                   fidelity_reason=rendered.fidelity_reason)
    try:
        index = await proxy.recorder.record(call)
    except RolloutClosed as exc:
        proxy.registry.mark_closed(state.id)
        return RolloutClosedError(str(exc)).response()
    proxy._account(state, [], tokens_lp)
    if wire is not None and rec_api == ApiKind.RESPONSES:
        proxy.remember_response(state, wire[2], resp_obj)
    headers = {"x-harnessrl-call-index": str(index)}
    if wire is not None and rec_body.get("stream"):
        return Response(events, media_type="text/event-stream", headers=headers)
    if wire is None and plan.stream:
        return Response(_as_sse(resp_obj, body), media_type="text/event-stream", headers=headers)
    return Response(orjson.dumps(resp_obj), media_type="application/json", headers=headers)


def _chat_logprobs(out: dict, i: int) -> dict:
    lp = (out["choices"][i].get("logprobs") or {})
    toks, vals = lp.get("tokens") or [], lp.get("token_logprobs") or []
    return {"content": [{"token": t, "logprob": v, "bytes": None, "top_logprobs": []}
                        for t, v in zip(toks, vals, strict=False)]}


def _as_sse(resp: dict, body: dict) -> bytes:
    """A complete chat answer as a chat.completion.chunk stream (one delta per choice)."""
    base = {"id": resp["id"], "object": "chat.completion.chunk", "created": resp["created"], "model": resp["model"]}
    parts = []
    for ch in resp["choices"]:
        delta = dict(ch["message"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{"index": k, **tc} for k, tc in enumerate(delta["tool_calls"])]
        parts.append({**base, "choices": [{"index": ch["index"], "delta": delta, "finish_reason": None}]})
        parts.append({**base, "choices": [{"index": ch["index"], "delta": {}, "finish_reason": ch["finish_reason"]}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        parts.append({**base, "choices": [], "usage": resp["usage"]})
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in parts) + b"data: [DONE]\n\n"
