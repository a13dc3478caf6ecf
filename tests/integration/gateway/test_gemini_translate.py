"""The Gemini translation and encoder on their own: a generateContent body in, the chat request out; chat
deltas in, Gemini's chunks out, and the complete response equal to what the chunks add up to."""

from __future__ import annotations

import orjson
import pytest

from harnessrl.gateway.apis import gemini
from harnessrl.gateway.errors import BadRequest

TOOLS = [{"functionDeclarations": [
    {"name": "read_file", "description": "read a file",
     "parameters": {"type": "OBJECT", "properties": {"path": {"type": "STRING", "nullable": True},
                                                     "lines": {"type": "ARRAY", "items": {"type": "INTEGER"}}},
                    "required": ["path"]}},
    {"name": "shell", "parametersJsonSchema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]},
    {"googleSearch": {}}]


def test_conversation_tools_and_config():
    body = {
        "systemInstruction": {"role": "user", "parts": [{"text": "Be terse."}, {"text": "Use tools."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "read "}, {"text": "a.py"}]},
            {"role": "model", "parts": [{"text": "thinking...", "thought": True},
                                        {"functionCall": {"name": "read_file", "args": {"path": "a.py"}},
                                         "thoughtSignature": "c2ln"},
                                        {"functionCall": {"name": "shell", "args": {"cmd": "ls"}, "id": "own"}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "shell", "id": "own",
                                                             "response": {"output": "a.py\n"}}},
                                       {"functionResponse": {"name": "read_file",
                                                             "response": {"lines": 3, "ok": True}}},
                                       {"text": "now?"}]},
        ],
        "tools": TOOLS,
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["shell"]}},
        "generationConfig": {"temperature": 0.2, "topP": 0.9, "topK": 40.0, "maxOutputTokens": 64,
                             "stopSequences": ["END"], "seed": 7, "candidateCount": 1,
                             "thinkingConfig": {"includeThoughts": True}},
        "safetySettings": [],
    }
    t = gemini.to_chat(body, "gemini-2.5-pro", stream=True)
    chat = t.chat
    assert chat["model"] == "gemini-2.5-pro" and chat["stream"] is True
    m = chat["messages"]
    assert m[0] == {"role": "system", "content": "Be terse.\n\nUse tools."}
    assert m[1] == {"role": "user", "content": "read a.py"}
    calls = m[2]["tool_calls"]
    assert m[2]["role"] == "assistant" and m[2]["content"] is None
    assert calls[0]["id"] == "call_1_1" and calls[0]["function"] == {"name": "read_file",
                                                                     "arguments": '{"path":"a.py"}'}
    assert calls[1]["id"] == "own"
    assert m[3] == {"role": "tool", "tool_call_id": "own", "content": "a.py\n"}
    assert m[4] == {"role": "tool", "tool_call_id": "call_1_1", "content": '{"lines":3,"ok":true}'}
    assert m[5] == {"role": "user", "content": "now?"}
    params = chat["tools"][0]["function"]["parameters"]
    assert params["properties"]["path"]["type"] == ["string", "null"]
    assert params["type"] == "object" and params["properties"]["lines"]["items"]["type"] == "integer"
    assert chat["tools"][1]["function"]["parameters"]["properties"]["cmd"] == {"type": "string"}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert (chat["temperature"], chat["top_p"], chat["top_k"], chat["max_tokens"], chat["stop"], chat["seed"]) == \
        (0.2, 0.9, 40, 64, ["END"], 7)
    assert t.notes["dropped_tools"] == ["googleSearch"]
    assert t.notes["ignored_parts"] == ["thought"]
    assert t.notes["ignored_fields"] == ["generationConfig.thinkingConfig", "safetySettings"]


def test_snake_case_names_structured_output_and_modes():
    body = {"system_instruction": {"parts": [{"text": "s"}]},
            "contents": [{"parts": [{"text": "hi"}]}],
            "tools": [{"function_declarations": [{"name": "f"}]}],
            "tool_config": {"function_calling_config": {"mode": "none"}},
            "generation_config": {"response_mime_type": "application/json",
                                  "response_schema": {"type": "OBJECT", "properties": {"a": {"type": "NUMBER"}}}}}
    chat = gemini.to_chat(body, "m").chat
    assert chat["messages"][0] == {"role": "system", "content": "s"}
    assert chat["tool_choice"] == "none" and chat["tools"][0]["function"]["parameters"] == {
        "type": "object", "properties": {}}
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": {"type": "object", "properties": {"a": {"type": "number"}}}}}
    plain = gemini.to_chat({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                            "generationConfig": {"responseMimeType": "application/json"}}).chat
    assert plain["response_format"] == {"type": "json_object"}
    anyof = gemini.to_chat({"contents": [{"parts": [{"text": "x"}]}], "tools": TOOLS[:1],
                            "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                                     "allowedFunctionNames": ["a", "b"]}}})
    assert anyof.chat["tool_choice"] == "required" and anyof.notes["allowed_function_names"] == ["a", "b"]


@pytest.mark.parametrize(("body", "needle"), [
    ({}, "'contents' is required"),
    ({"contents": []}, "'contents' is required"),
    ({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, "contents[0].role"),
    ({"contents": [{"parts": "x"}]}, "contents[0].parts must be a list"),
    ({"contents": [{"parts": [{"text": 5}]}]}, "contents[0].parts[0].text must be a string"),
    ({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]}]}, "inlineData"),
    ({"contents": [{"parts": [{"file_data": {"fileUri": "gs://x"}}]}]}, "fileData"),
    ({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"candidateCount": 2}}, "candidateCount"),
    ({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"topK": 1.5}}, "topK"),
    ({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 0}}, "maxOutputTokens"),
    ({"contents": [{"parts": [{"text": "x"}]}], "toolConfig": {"functionCallingConfig": {"mode": "SOME"}}}, "mode"),
    ({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]}, "functionCall.name"),
    ({"contents": [{"parts": [{"executableCode": {}}]}]}, "no text"),
])
def test_refused_with_the_field_named(body, needle):
    with pytest.raises(BadRequest) as info:
        gemini.to_chat(body, "m")
    assert needle in info.value.message
    if "inlineData" in needle or "fileData" in needle:
        assert info.value.code == "unsupported_content"


def test_count_request_reads_both_shapes():
    c = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    assert gemini.count_request(c).chat["messages"] == [{"role": "user", "content": "hi"}]
    inner = gemini.count_request({"generateContentRequest": {"model": "models/x", **c,
                                                             "systemInstruction": "s"}})
    assert inner.chat["messages"][0] == {"role": "system", "content": "s"}


DELTAS = [
    {"role": "assistant", "content": ""},
    {"reasoning_content": "Two "}, {"reasoning_content": "files."},
    {"content": "Reading "}, {"content": "both."},
    {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]},
    {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                     "function": {"name": "read", "arguments": '{"path": "b.py"}'}}]},
]


def _sse(payload: bytes) -> list[dict]:
    return [orjson.loads(block.removeprefix(b"data: ")) for block in payload.strip().split(b"\r\n\r\n")]


def test_encoder_streams_text_and_closes_with_calls_and_usage():
    enc = gemini.ContentEncoder("gemini-x")
    out = enc.start(12) + b"".join(enc.feed(d) for d in DELTAS)
    streamed = _sse(out)
    assert [c["candidates"][0]["content"]["parts"] for c in streamed] == [
        [{"text": "Two ", "thought": True}], [{"text": "files.", "thought": True}],
        [{"text": "Reading "}], [{"text": "both."}]]
    assert all("finishReason" not in c["candidates"][0] for c in streamed)
    last = _sse(enc.finish("tool_calls", None, 12, 30))[0]
    cand = last["candidates"][0]
    assert cand["finishReason"] == "STOP" and last["usageMetadata"] == {
        "promptTokenCount": 12, "candidatesTokenCount": 30, "totalTokenCount": 42}
    assert [p["functionCall"] for p in cand["content"]["parts"]] == [
        {"name": "read", "args": {"path": "a.py"}, "id": "call_a"},
        {"name": "read", "args": {"path": "b.py"}, "id": "call_b"}]
    result = enc.result()
    assert result["modelVersion"] == "gemini-x" and result["responseId"] == last["responseId"]
    assert result["candidates"][0]["content"]["parts"] == [
        {"text": "Two files.", "thought": True}, {"text": "Reading both."}, *cand["content"]["parts"]]


def test_encoder_json_array_and_errors():
    enc = gemini.ContentEncoder("m", sse=False)
    out = enc.start(3) + enc.feed({"content": "hi"}) + enc.feed({"content": "!"}) + enc.finish("length", None, 3, 2)
    chunks = orjson.loads(out)
    assert [c["candidates"][0].get("content", {}).get("parts") for c in chunks] == [
        [{"text": "hi"}], [{"text": "!"}], None]
    assert chunks[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert enc.content_type == b"application/json"
    broken = gemini.ContentEncoder("m", sse=False)
    out = broken.feed({"content": "a"}) + broken.error_event("engine died")
    assert orjson.loads(out)[-1]["error"]["status"] == "UNAVAILABLE"
    assert orjson.loads(gemini.ContentEncoder("m", sse=False).error_event("x"))[0]["error"]["code"] == 502
    assert gemini.error_body(401, "no key", "missing_api_key")["error"]["status"] == "UNAUTHENTICATED"


def test_a_gemini_call_reads_as_turns():
    from harnessrl.conversation import request_turns, response_turns

    turns = request_turns({"systemInstruction": {"parts": [{"text": "be brief"}]}, "contents": [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": "hm", "thought": True}, {"functionCall": {"name": "f", "args": {"a": 1}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "ok"}}}]}]})
    assert [(t.role, t.text) for t in turns] == [
        ("system", "be brief"), ("user", "q"), ("model", '(thought) hm\n→ tool call f({"a": 1})'),
        ("user", '← f: {"output": "ok"}')]
    out = response_turns({"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}]},
                                          "finishReason": "STOP"}]})
    assert [(t.role, t.text) for t in out] == [("model (STOP)", "a")]
