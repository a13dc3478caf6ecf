"""Google's Gemini API (``generateContent``, ``streamGenerateContent``) as a translation to and from the
internal chat request.

The Gemini CLI and the ``google-genai`` clients point their base URL at ``<gateway>/r/<rollout>`` and call
``POST /v1beta/models/<model>:generateContent`` or ``:streamGenerateContent?alt=sse``; the model is named
in the path, the key travels in ``x-goog-api-key`` (or ``?key=``). ``to_chat`` turns a request into a chat
body: ``contents`` (roles ``user``/``model``; text, ``functionCall`` and ``functionResponse`` parts),
``systemInstruction``, ``tools[].functionDeclarations``, ``toolConfig`` and ``generationConfig``. Fields
the policy cannot honour (safety settings, thinking config, hosted tools, ...) are accepted and listed in
the translation's notes; inline and file media are refused, since the policy reads text only. The REST API
takes snake_case names as well as camelCase (curl examples use ``system_instruction``): both are read.

Gemini's function calls may carry no ``id``; one is made from the call's position in ``contents`` (stable
across the rollout's calls, so token reuse holds), and a ``functionResponse`` without a known id answers
the earliest unanswered call of its name. ``ContentEncoder`` turns chat deltas into response chunks as
they arrive (SSE, or the JSON array Google answers without ``alt=sse``) and builds the complete response
for the record from the same deltas.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request

from harnessrl.gateway.apis.base import (
    Translation,
    data_url,
    expect_dict,
    expect_list,
    expect_str,
    json_schema,
    parts_content,
    unsupported_media,
)
from harnessrl.gateway.errors import BadRequest

#: Request fields translated into the chat request (camelCase; snake_case is read as the same field).
_USED = frozenset({"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"})
#: generationConfig fields translated (the rest are noted as ``generationConfig.<name>``).
_GEN_USED = frozenset({"temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "candidateCount",
                       "seed", "presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema",
                       "responseJsonSchema", "_responseJsonSchema"})
#: Part fields that carry media a text-only policy cannot read.
_MEDIA_PARTS = ("inlineData", "fileData")
#: Part fields with no meaning for the policy (accepted silently, like Anthropic's cache_control).
_PART_META = frozenset({"thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"})
#: chat finish_reason -> Gemini finishReason (a function call ends with STOP, as Gemini's own models do).
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "function_call": "STOP", "length": "MAX_TOKENS",
           "content_filter": "SAFETY"}
#: What the routes serve, for the models list.
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_SNAKE = re.compile(r"_([a-z])")


def _camel(obj: dict[str, Any]) -> dict[str, Any]:
    """An object's keys in camelCase (the REST API reads ``function_call`` as ``functionCall``)."""
    if not any("_" in k for k in obj):
        return obj
    return {(_SNAKE.sub(lambda m: m.group(1).upper(), k) if not k.startswith("_") else k): v
            for k, v in obj.items()}


@dataclass(slots=True)
class GeminiTranslation(Translation):
    """A Gemini request in chat form; ``sse``: a streamed answer as SSE (``alt=sse``), else a JSON array."""

    sse: bool = True


def _number(obj: dict[str, Any], key: str, where: str) -> float | int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadRequest(f"{where}.{key} must be a number")
    return v


def _integer(obj: dict[str, Any], key: str, where: str, minimum: int) -> int | None:
    """An integer field (JSON clients may send 40.0 for 40: Gemini's own client types topK as a float),
    within 64 bits (it is recorded)."""
    v = _number(obj, key, where)
    if v is None:
        return None
    if v != int(v) or not minimum <= v < 2**63:
        raise BadRequest(f"{where}.{key} must be an integer >= {minimum} (and below 2**63)")
    return int(v)


def _schema(value: Any, where: str) -> Any:
    """Gemini's OpenAPI-style Schema as JSON Schema: types in lower case, ``nullable`` as a null type."""
    if not isinstance(value, dict):
        return value
    s = _camel(value)
    out: dict[str, Any] = {}
    for key, v in s.items():
        if key == "type" and isinstance(v, str):
            if v.upper() != "TYPE_UNSPECIFIED":
                out["type"] = v.lower()
        elif key == "properties" and isinstance(v, dict):
            out["properties"] = {name: _schema(p, f"{where}.properties.{name}") for name, p in v.items()}
        elif key in ("items", "additionalProperties") and isinstance(v, dict):
            out[key] = _schema(v, f"{where}.{key}")
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(v, list):
            out[key] = [_schema(x, f"{where}.{key}") for x in v]
        elif key == "nullable":
            continue
        else:
            out[key] = v
    if s.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _content_text(content: Any, where: str, t: Translation) -> str:
    """The text of a Content object (systemInstruction), or of a bare string; other parts refused or noted."""
    if isinstance(content, str):
        return content
    content = _camel(expect_dict(content, where))
    texts = []
    for j, part in enumerate(expect_list(content.get("parts") or [], f"{where}.parts")):
        part = _camel(expect_dict(part, f"{where}.parts[{j}]"))
        if "text" in part:
            texts.append(expect_str(part["text"], f"{where}.parts[{j}].text"))
            continue
        _other_part(part, f"{where}.parts[{j}]", t)
    return "\n\n".join(x for x in texts if x)


def _image(part: dict[str, Any], where: str, t: Translation) -> dict[str, Any] | None:
    """A user part's image (``inlineData`` base64, ``fileData`` URI, an ``image/*`` type) as a chat image part;
    None for any other part."""
    if "inlineData" in part:
        blob = _camel(expect_dict(part["inlineData"], f"{where}.inlineData"))
        mime = blob.get("mimeType")
        if isinstance(mime, str) and mime.startswith("image/"):
            return t.image(data_url(mime, blob.get("data"), f"{where}.inlineData"), "inlineData", where)
    if "fileData" in part:
        ref = _camel(expect_dict(part["fileData"], f"{where}.fileData"))
        mime = ref.get("mimeType")
        if isinstance(mime, str) and mime.startswith("image/"):
            return t.image(expect_str(ref.get("fileUri"), f"{where}.fileData.fileUri"), "fileData", where)
    return None


def _other_part(part: dict[str, Any], where: str, t: Translation) -> None:
    """A part that is not text, a function call or a function response: media refused, the rest noted."""
    for key in _MEDIA_PARTS:
        if key in part:
            raise unsupported_media(key, where, t.images)
    kinds = [k for k in part if k not in _PART_META and k != "thought"]
    t.note("ignored_parts", kinds[0] if kinds else "empty")


def _response_text(response: Any, where: str) -> str:
    """A function's result as the tool message's text: a lone ``output``/``result``/``content`` string is
    the text itself (Gemini CLI sends ``{"output": ...}``), anything else its compact JSON."""
    if response is None:
        return ""
    response = expect_dict(response, where)
    if len(response) == 1:
        (key, value), = response.items()
        if key in ("output", "result", "content") and isinstance(value, str):
            return value
    return orjson.dumps(response).decode()


class _Calls:
    """Function-call ids: the part's own, else one made from its position; responses matched to calls."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, str]] = []  # (id, name) of calls not yet answered, oldest first

    def call_id(self, fc: dict[str, Any], i: int, j: int, where: str) -> str:
        given = fc.get("id")
        cid = expect_str(given, f"{where}.id") if given else f"call_{i}_{j}"
        self.pending.append((cid, expect_str(fc.get("name"), f"{where}.name")))
        return cid

    def answer(self, fr: dict[str, Any], i: int, j: int, where: str) -> str:
        """The id of the call a response answers: its own id if a call has it, else the earliest unanswered
        call of its name, else its own id (or one made from its position)."""
        name = expect_str(fr.get("name", ""), f"{where}.name")
        given = fr.get("id")
        if given is not None:
            expect_str(given, f"{where}.id")
        ids = [cid for cid, _ in self.pending]
        names = [cname for _, cname in self.pending]
        if given and given in ids:
            return self.pending.pop(ids.index(given))[0]
        if name in names:
            return self.pending.pop(names.index(name))[0]
        return given or f"call_{i}_{j}"


def _content(i: int, content: Any, t: Translation, calls: _Calls, out: list[dict[str, Any]]) -> None:
    where = f"contents[{i}]"
    content = _camel(expect_dict(content, where))
    role = content.get("role") or "user"
    if role not in ("user", "model", "function"):
        raise BadRequest(f"{where}.role must be 'user' or 'model', not {role!r}")
    parts = expect_list(content.get("parts") or [], f"{where}.parts")
    text: list[str | dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        here = f"{where}.parts[{j}]"
        part = _camel(expect_dict(part, here))
        if "text" in part:
            value = expect_str(part["text"], f"{here}.text")
            if part.get("thought") is True:
                t.note("ignored_parts", "thought")  # earlier reasoning is not shown again (as with Gemini)
            else:
                text.append(value)
        elif "functionCall" in part and role == "model":
            fc = _camel(expect_dict(part["functionCall"], f"{here}.functionCall"))
            args = fc.get("args")
            args = {} if args is None else expect_dict(args, f"{here}.functionCall.args")
            tool_calls.append({"id": calls.call_id(fc, i, j, f"{here}.functionCall"), "type": "function",
                               "function": {"name": fc["name"], "arguments": orjson.dumps(args).decode()}})
        elif "functionResponse" in part and role != "model":
            fr = _camel(expect_dict(part["functionResponse"], f"{here}.functionResponse"))
            for k, sub in enumerate(expect_list(fr.get("parts") or [], f"{here}.functionResponse.parts")):
                sub = _camel(expect_dict(sub, f"{here}.functionResponse.parts[{k}]"))
                _other_part(sub, f"{here}.functionResponse.parts[{k}]", t)
            if text:  # keep the order of text and results within one user turn
                out.append({"role": "user", "content": parts_content(text)})
                text = []
            cid = calls.answer(fr, i, j, f"{here}.functionResponse")
            out.append({"role": "tool", "tool_call_id": cid,
                        "content": _response_text(fr.get("response"), f"{here}.functionResponse.response")})
        elif role == "user" and t.images and (image := _image(part, here, t)) is not None:
            text.append(image)
        else:
            _other_part(part, here, t)
    if text or tool_calls:
        msg: dict[str, Any] = {"role": "assistant" if role == "model" else "user",
                               "content": parts_content(text) if text else None}
        if tool_calls:
            msg["tool_calls"] = tool_calls
        out.append(msg)


def _tools(tools: Any, t: Translation) -> list[dict[str, Any]]:
    out = []
    for k, tool in enumerate(expect_list(tools, "'tools'")):
        tool = _camel(expect_dict(tool, f"tools[{k}]"))
        for key in tool:
            if key != "functionDeclarations":  # hosted tools: googleSearch, codeExecution, urlContext, ...
                t.note("dropped_tools", key)
        for d, decl in enumerate(expect_list(tool.get("functionDeclarations") or [],
                                             f"tools[{k}].functionDeclarations")):
            where = f"tools[{k}].functionDeclarations[{d}]"
            decl = _camel(expect_dict(decl, where))
            if decl.get("parametersJsonSchema") is not None:
                params = json_schema(decl["parametersJsonSchema"], f"{where}.parametersJsonSchema")
            else:
                params = _schema(json_schema(decl.get("parameters"), f"{where}.parameters"), f"{where}.parameters")
            out.append({"type": "function", "function": {
                "name": expect_str(decl.get("name"), f"{where}.name"),
                "description": expect_str(decl.get("description") or "", f"{where}.description"),
                "parameters": params}})
    return out


def _tool_choice(config: Any, chat: dict[str, Any], t: Translation) -> None:
    """``toolConfig.functionCallingConfig`` as the chat API's ``tool_choice``."""
    config = _camel(expect_dict(config, "'toolConfig'"))
    for key in config:
        if key != "functionCallingConfig":
            t.note("ignored_fields", f"toolConfig.{key}")
    fcc = config.get("functionCallingConfig")
    if fcc is None:
        return
    fcc = _camel(expect_dict(fcc, "toolConfig.functionCallingConfig"))
    mode = fcc.get("mode") or "AUTO"
    mode = expect_str(mode, "toolConfig.functionCallingConfig.mode").upper()
    names = [expect_str(n, "toolConfig.functionCallingConfig.allowedFunctionNames[]")
             for n in expect_list(fcc.get("allowedFunctionNames") or [],
                                  "toolConfig.functionCallingConfig.allowedFunctionNames")]
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
        raise BadRequest("toolConfig.functionCallingConfig.mode must be 'AUTO', 'ANY', 'NONE' or 'VALIDATED'")
    if "tools" not in chat:
        return
    if mode == "NONE":
        chat["tool_choice"] = "none"
    elif mode == "ANY" and len(names) == 1:
        chat["tool_choice"] = {"type": "function", "function": {"name": names[0]}}
    elif mode == "ANY":
        chat["tool_choice"] = "required"
        if names:  # the chat API names one function or any: the restriction to several is not enforced
            t.notes["allowed_function_names"] = names
    else:
        chat["tool_choice"] = "auto"
        if mode == "VALIDATED":
            t.note("ignored_fields", "toolConfig.functionCallingConfig.mode=VALIDATED")


def _generation(config: Any, chat: dict[str, Any], t: Translation) -> None:
    """``generationConfig``: sampling, length, stops and structured output; the rest noted."""
    where = "generationConfig"
    g = _camel(expect_dict(config, f"'{where}'"))
    for key in ("temperature", "topP", "presencePenalty", "frequencyPenalty"):
        v = _number(g, key, where)
        if v is not None:
            chat[{"topP": "top_p", "presencePenalty": "presence_penalty",
                  "frequencyPenalty": "frequency_penalty"}.get(key, key)] = v
    for key, name, minimum in (("topK", "top_k", 0), ("maxOutputTokens", "max_tokens", 1), ("seed", "seed", -2**63)):
        v = _integer(g, key, where, minimum)
        if v is not None:
            chat[name] = v
    count = _integer(g, "candidateCount", where, 1)
    if count is not None and count > 1:
        raise BadRequest(f"{where}.candidateCount: this gateway serves one candidate a request; ask {count} "
                         "times (each answer is sampled and recorded)", code="unsupported_parameter")
    stops = g.get("stopSequences")
    if stops:
        chat["stop"] = [expect_str(s, f"{where}.stopSequences[]") for s in expect_list(stops, f"{where}.stopSequences")]
    mime = g.get("responseMimeType")
    if mime is not None:
        mime = expect_str(mime, f"{where}.responseMimeType")
    schema = g.get("responseJsonSchema", g.get("_responseJsonSchema"))
    if schema is None and g.get("responseSchema") is not None:
        schema = _schema(expect_dict(g["responseSchema"], f"{where}.responseSchema"), f"{where}.responseSchema")
    if mime == "application/json":  # structured output is served (vLLM: guided decoding), not ignored
        if schema is not None:
            chat["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "response", "schema": expect_dict(schema, f"{where}.responseJsonSchema")}}
        else:
            chat["response_format"] = {"type": "json_object"}
    elif mime not in (None, "text/plain") or schema is not None:
        t.note("ignored_fields", f"{where}.responseMimeType={mime}" if mime else f"{where}.responseSchema")
    for key in g:
        if key not in _GEN_USED:
            t.note("ignored_fields", f"{where}.{key}")


def to_chat(body: Any, model: str | None = None, stream: bool = False, sse: bool = True,
            images: bool = False) -> GeminiTranslation:
    """The chat request equivalent to a generateContent body (400 only for what cannot be served honestly).

    ``model``: the name in the request's path; ``stream``: the route was ``streamGenerateContent``."""
    body = _camel(expect_dict(body, "the request body"))
    t = GeminiTranslation(chat={}, sse=sse, images=images)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise BadRequest("'contents' is required and must be a non-empty list")
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system is not None:
        text = _content_text(system, "systemInstruction", t)
        if text:
            messages.append({"role": "system", "content": text})
    calls = _Calls()
    for i, content in enumerate(contents):
        _content(i, content, t, calls, messages)
    if not any(m["role"] != "system" for m in messages):
        raise BadRequest("'contents' holds no text, function call or function response to answer")
    chat: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    if messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
        # a prefilled answer: the policy continues it (vLLM's flags; render mode sees the last role)
        chat.update(continue_final_message=True, add_generation_prompt=False)
    if body.get("tools"):
        tools = _tools(body["tools"], t)
        if tools:
            chat["tools"] = tools
    if body.get("toolConfig") is not None:
        _tool_choice(body["toolConfig"], chat, t)
    if body.get("generationConfig") is not None:
        _generation(body["generationConfig"], chat, t)
    ignored = sorted(k for k in body if k not in _USED)
    if ignored:
        t.notes["ignored_fields"] = sorted({*t.notes.get("ignored_fields", []), *ignored})
    t.chat = chat
    return t


def from_route(body: Any, request: Request, images: bool = False) -> GeminiTranslation:
    """A Gemini route's request: the model is named in its path, the route says whether to stream, and
    ``alt=sse`` how (Google answers a JSON array of chunks without it)."""
    return to_chat(body, request.path_params.get("model"), stream=request.url.path.endswith(":streamGenerateContent"),
                   sse=request.query_params.get("alt") == "sse", images=images)


def answered_message(response: dict[str, Any]) -> dict[str, Any]:
    """The chat message of a recorded answer, as the harness sends it back (a gateway restart's reload)."""
    content = response["candidates"][0]["content"]
    history = to_chat({"contents": [{"role": "user", "parts": [{"text": "-"}]}, content]})
    return history.chat["messages"][-1]


def count_request(body: Any, model: str | None = None, images: bool = False) -> GeminiTranslation:
    """A countTokens body (``contents``, or a whole ``generateContentRequest``) as the chat request counted."""
    body = _camel(expect_dict(body, "the request body"))
    inner = body.get("generateContentRequest")
    if inner is not None:
        return to_chat(inner, model, images=images)
    return to_chat({k: v for k, v in body.items() if k in ("contents", "systemInstruction", "tools")}, model,
                   images=images)


# -- errors and the models list -------------------------------------------------------------------------

#: google.rpc status names by HTTP status (Google's clients and the Gemini CLI read ``error.status``).
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           405: "UNIMPLEMENTED", 409: "ABORTED", 410: "FAILED_PRECONDITION", 413: "INVALID_ARGUMENT",
           429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
           502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def status_name(status: int) -> str:
    return _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def error_body(status: int, message: str, code: str | None) -> dict[str, Any]:
    """An error in Google's shape (``{"error": {"code", "message", "status"}}``), the gateway's own code in
    its ``details`` as a google.rpc.ErrorInfo ``reason``."""
    err: dict[str, Any] = {"code": status, "message": message, "status": status_name(status)}
    if code:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code,
                           "domain": "harnessrl"}]
    return {"error": err}


def model_info(name: str, served: str, version: int, max_output: int) -> dict[str, Any]:
    """A Model resource: any name asked for is served by the policy (``served`` is its own name)."""
    return {"name": name if name.startswith("models/") else f"models/{name}", "baseModelId": served,
            "version": str(version), "displayName": served,
            "description": f"served by harnessrl: the policy {served!r}, version {version}",
            "outputTokenLimit": max_output, "supportedGenerationMethods": list(METHODS)}


# -- the answer -----------------------------------------------------------------------------------------

class ContentEncoder:
    """Chat deltas in, GenerateContentResponse chunks out; ``result()`` is the response they add up to.

    Text streams as it arrives; a function call is sent whole once its arguments are complete (Gemini
    never splits one), with the closing chunk (finishReason, usageMetadata) that waits for the record."""

    def __init__(self, model: str, sse: bool = True) -> None:
        self.id = uuid.uuid4().hex[:24]
        self.model, self.sse = model, sse
        self.content_type = b"text/event-stream" if sse else b"application/json"
        self.parts: list[dict[str, Any]] = []  # the whole answer: text, thought and functionCall parts
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> {"id", "name", "args": [..]}
        self._chunks = 0
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}

    def _frame(self, obj: dict[str, Any]) -> bytes:
        self._chunks += 1
        data = orjson.dumps(obj)
        if self.sse:
            return b"data: " + data + b"\r\n\r\n"
        return (b"[" if self._chunks == 1 else b",\r\n") + data

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        cand: dict[str, Any] = {"index": 0}
        if parts:
            cand["content"] = {"role": "model", "parts": parts}
        if finish is not None:
            cand["finishReason"] = finish
        obj: dict[str, Any] = {"candidates": [cand], "modelVersion": self.model, "responseId": self.id}
        if finish is not None:
            obj["usageMetadata"] = self.usage
        return self._frame(obj)

    def _add_text(self, text: str, thought: bool) -> dict[str, Any]:
        part: dict[str, Any] = {"text": text, "thought": True} if thought else {"text": text}
        last = self.parts[-1] if self.parts else None
        if last is not None and "text" in last and bool(last.get("thought")) == thought:
            last["text"] += text
        else:
            self.parts.append(dict(part))
        return part

    def start(self, input_tokens: int) -> bytes:
        self.usage = {"promptTokenCount": input_tokens, "candidatesTokenCount": 0, "totalTokenCount": input_tokens}
        return b""

    def feed(self, delta: dict[str, Any]) -> bytes:
        """A chunk for the text of one chat delta; tool-call fragments are gathered for ``finish``."""
        parts = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(self._add_text(reasoning, True))
        text = delta.get("content")
        if isinstance(text, str) and text:
            parts.append(self._add_text(text, False))
        for k, tc in enumerate(delta.get("tool_calls") or ()):
            fn = tc.get("function") or {}
            call = self._calls.setdefault(tc.get("index", k), {"id": None, "name": "", "args": []})
            call["id"] = call["id"] or tc.get("id")
            call["name"] += fn.get("name") or ""
            if fn.get("arguments"):
                call["args"].append(fn["arguments"])
        return self._chunk(parts) if parts else b""

    def finish(self, finish_reason: str | None, stop_string: Any, input_tokens: int, output_tokens: int) -> bytes:
        """The closing chunk: the function calls, finishReason and usageMetadata (then ``]`` for an array)."""
        self.finish_reason = _FINISH.get(finish_reason or "stop", "OTHER")
        self.usage = {"promptTokenCount": input_tokens, "candidatesTokenCount": output_tokens,
                      "totalTokenCount": input_tokens + output_tokens}
        calls = []
        for _, c in sorted(self._calls.items()):
            raw = "".join(c["args"]) or "{}"
            try:
                args = orjson.loads(raw)
            except orjson.JSONDecodeError:
                args = {"_raw_arguments": raw}
            fc: dict[str, Any] = {"name": c["name"], "args": args}
            fc["id"] = c["id"] or f"call_{uuid.uuid4().hex[:24]}"
            calls.append({"functionCall": fc})
        self.parts += calls
        out = self._chunk(calls, self.finish_reason)
        return out if self.sse else out + b"]"

    def result(self) -> dict[str, Any]:
        """The complete response (what a non-streamed request gets; what the record keeps)."""
        cand: dict[str, Any] = {"content": {"role": "model", "parts": self.parts or [{"text": ""}]},
                                "finishReason": self.finish_reason or "STOP", "index": 0}
        return {"candidates": [cand], "usageMetadata": self.usage, "modelVersion": self.model,
                "responseId": self.id}

    def error_event(self, message: str, kind: str = "upstream_error") -> bytes:
        """Google's error object in-band (a stream cannot change its status once started)."""
        body = error_body(502, message, kind)
        if self.sse:
            return b"data: " + orjson.dumps(body) + b"\r\n\r\n"
        return (b"[" if self._chunks == 0 else b",\r\n") + orjson.dumps(body) + b"]"
