"""Property: whenever a harness only appends to its conversation, every prompt extends the previous one."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessrl.gateway.render import TemplateRenderer
from harnessrl.types import Fidelity

IM_END = 2
_rollouts = itertools.count()

text = st.text(alphabet=st.sampled_from(list("abc xyzÉé日本 \n\t.,!?{}\"'0123456789")), max_size=30)


@st.composite
def completion_ids(draw, tokenizer, body: str):
    """``body`` sampled as a random split into pieces (often not the canonical encoding), maybe + stop token."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(body) - 1)), max_size=4))) if len(body) > 1 else []
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    ids = [t for piece in pieces if piece for t in tokenizer.encode(piece, add_special_tokens=False)]
    return ids + ([IM_END] if draw(st.booleans()) else [])


@st.composite
def turns(draw):
    kind = draw(st.sampled_from(["text", "tool", "tools"]))
    if kind == "text":
        return ("text", draw(text), draw(text))
    n = 1 if kind == "tool" else 2
    args = [draw(st.dictionaries(st.sampled_from(["q", "n", "deep"]), st.one_of(text, st.integers()), max_size=2))
            for _ in range(n)]
    spacing = draw(st.sampled_from([None, (",", ":")]))
    lead = draw(st.sampled_from(["", "Let me look.\n"]))
    calls = "\n".join("<tool_call>\n" + json.dumps({"name": "lookup", "arguments": a}, separators=spacing)
                      + "\n</tool_call>" for a in args)
    return ("tool", lead + calls, [draw(text) for _ in range(n)])


TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), script=st.lists(turns(), min_size=1, max_size=6), system=st.booleans())
def test_appending_conversations_are_exact_or_extended(smollm2_tokenizer, data, script, system):
    tok = smollm2_tokenizer
    renderer = _renderer(tok)
    rollout = f"p{next(_rollouts)}"
    messages = ([{"role": "system", "content": "sys"}] if system else []) + [{"role": "user", "content": "start"}]
    previous = None
    for kind, completion_text, follow_up in script:
        body = {"messages": [dict(m) for m in messages], "tools": TOOLS}
        rendered = renderer.render(rollout, body)
        if previous is None:
            assert rendered.fidelity == Fidelity.RERENDERED
        else:
            assert rendered.fidelity in (Fidelity.EXACT, Fidelity.EXTENDED), rendered.fidelity_reason
            expected = previous[0].prompt_token_ids + previous[1]
            assert rendered.prompt_token_ids[: len(expected)] == expected
        ids = data.draw(completion_ids(tok, completion_text))
        message, finish = renderer.parse(rollout, ids, "stop")
        renderer.remember(rollout, body, rendered, ids, message)
        previous = (rendered, ids)
        messages.append(message)
        if kind == "tool":
            assert finish == "tool_calls" and len(message["tool_calls"]) == len(follow_up)
            messages.extend({"role": "tool", "tool_call_id": c["id"], "content": r}
                            for c, r in zip(message["tool_calls"], follow_up, strict=True))
        else:
            messages.append({"role": "user", "content": follow_up})


_cache: dict[int, TemplateRenderer] = {}


def _renderer(tokenizer) -> TemplateRenderer:
    return _cache.setdefault(id(tokenizer), TemplateRenderer(tokenizer))


@settings(max_examples=25, deadline=None)
@given(script=st.lists(turns(), min_size=1, max_size=4), system=st.booleans(), tools=st.booleans())
def test_fast_template_path_renders_like_apply_chat_template(smollm2_tokenizer, script, system, tools):
    renderer = _renderer(smollm2_tokenizer)
    assert renderer.chat.compiled is not None  # the fast path is in use for the SmolLM2 template
    messages = ([{"role": "system", "content": "sys"}] if system else []) + [{"role": "user", "content": "go"}]
    for i, (kind, completion_text, follow_up) in enumerate(script):
        if kind == "text":
            messages += [{"role": "assistant", "content": completion_text}, {"role": "user", "content": follow_up}]
        else:
            calls = [{"id": f"c{i}_{j}", "type": "function", "function": {"name": "lookup", "arguments": {"q": r}}}
                     for j, r in enumerate(follow_up)]
            messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, follow_up, strict=True)]
    for generation in (False, True):
        expected = smollm2_tokenizer.apply_chat_template(
            messages, tools=TOOLS if tools else None, chat_template=renderer.template, tokenize=False,
            add_generation_prompt=generation)
        assert renderer.render_text(messages, TOOLS if tools else None, generation=generation) == expected
