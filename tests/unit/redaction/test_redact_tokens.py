"""Secrets out of stored token IDs: every stored array decodes without the secret, lengths kept."""

from __future__ import annotations

import pytest

from harnessrl.models import tiny_tokenizer
from harnessrl.redaction.text import DEFAULT_REDACTIONS
from harnessrl.redaction.tokens import TokenRedactor
from harnessrl.store.base import NewCall
from harnessrl.types import ApiKind, CallStatus, ChoiceTokens

SECRET = "sk-live-4f9Qz7XbT2mK8wR1nV6cY3hJ"


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def call_of(prompt: list[int], completions: list[list[int]], response: dict | None = None,
            request: dict | None = None) -> NewCall:
    return NewCall("r", ApiKind.CHAT, CallStatus.OK, request or {}, response,
                   prompt, [ChoiceTokens(c, [-0.5] * len(c), "stop") for c in completions], 0)


def decoded(tok, call: NewCall) -> list[str]:
    """Every way a reader could decode the stored arrays."""
    out = [tok.decode(call.prompt_token_ids)]
    for c in call.choices:
        out += [tok.decode(c.token_ids), tok.decode(call.prompt_token_ids + c.token_ids),
                "".join(tok.decode([t]) for t in call.prompt_token_ids + c.token_ids)]
    return out


@pytest.mark.parametrize("byte_level", [True, False], ids=["byte-level", "any-tokenizer"])
def test_secret_in_prompt_and_completion_is_replaced_whole_tokens(tok, byte_level):
    r = TokenRedactor(DEFAULT_REDACTIONS, tok)
    r._byte_level = byte_level  # the generic path (prefix decoding) must find the same tokens
    prompt = tok.apply_chat_template([{"role": "user", "content": f"use {SECRET}, é漢字 thanks"}],
                                     add_generation_prompt=True, tokenize=False)
    p = ids(tok, prompt)
    c = ids(tok, f"ok:{SECRET}!漢")
    call = call_of(p, [c], response={"choices": [{"message": {"content": "x"}, "logprobs": {"content": [1]}}]})
    orig_p, orig_c = call.prompt_token_ids, call.choices[0].token_ids
    marker = r.scrub(call)
    assert marker is not None and "dropped" not in marker
    assert all(SECRET not in text and "sk-live" not in text for text in decoded(tok, call))
    assert len(call.prompt_token_ids) == len(p) and len(call.choices[0].token_ids) == len(c)  # aligned
    assert call.choices[0].logprobs == [-0.5] * len(c)
    assert marker["prompt"] > 0 and marker["completion"][0] > 0
    assert marker["tokens"] == marker["prompt"] + marker["completion"][0]
    (ps, pe), = marker["prompt_spans"]
    assert set(call.prompt_token_ids[ps:pe]) == {r.placeholder} and tok.decode([r.placeholder]) == "*"
    assert "-" not in tok.decode(call.prompt_token_ids[ps - 1:pe + 1]).replace("*", "")  # nothing left over
    assert "漢字 thanks" in tok.decode(call.prompt_token_ids) and tok.decode(call.choices[0].token_ids).endswith("!漢")
    assert orig_p == p and orig_c == c  # the gateway's in-memory copies are untouched
    assert "logprobs" not in call.response["choices"][0]  # logprob token strings would spell it


def test_secret_straddling_prompt_and_completion(tok):
    """Completions API: the prompt ends with the key's start, the model writes the rest."""
    r = TokenRedactor(DEFAULT_REDACTIONS, tok)
    call = call_of(ids(tok, "key = sk-live-"), [ids(tok, "4f9Qz7XbT2mK8wR1nV6cY3hJ\nnext")])
    marker = r.scrub(call)
    assert marker["prompt"] > 0 and marker["completion"][0] > 0
    whole = tok.decode(call.prompt_token_ids + call.choices[0].token_ids)
    assert "sk-live" not in whole and "4f9Qz7" not in whole and whole.endswith("\nnext")


def test_clean_call_untouched_and_token_id_prompts_scanned(tok):
    r = TokenRedactor(DEFAULT_REDACTIONS, tok)
    call = call_of(ids(tok, "hello"), [ids(tok, " world")], response={"choices": []})
    assert not r.needs_scan(call, text_hit=False) and r.scrub(call) is None
    assert call.prompt_token_ids == ids(tok, "hello")
    by_ids = call_of(ids(tok, SECRET), [ids(tok, "x")], response={"choices": []},
                     request={"prompt": ids(tok, SECRET)})
    assert r.needs_scan(by_ids, text_hit=False)  # no text to tell: the IDs are decoded
    r.scrub(by_ids)
    assert by_ids.request["prompt"] == "[REDACTED]" and SECRET not in tok.decode(by_ids.prompt_token_ids)
    cut_short = call_of([], [ids(tok, SECRET)])  # cancelled mid-answer: tokens, no response text
    assert r.needs_scan(cut_short, text_hit=False)
    failed = call_of([], [ids(tok, SECRET)], response={"error": {"message": "engine failed mid-stream"}})
    failed.status = CallStatus.ERROR
    assert r.needs_scan(failed, text_hit=False)
    r.scrub(failed)
    assert SECRET not in tok.decode(failed.choices[0].token_ids)


def test_without_tokenizer_the_arrays_are_dropped(tok):
    call = call_of(ids(tok, f"a {SECRET}"), [ids(tok, "b")])
    blind = TokenRedactor(DEFAULT_REDACTIONS, None)
    assert blind.needs_scan(call, text_hit=True) and not blind.needs_scan(call_of([1, 2], [[3]]), text_hit=False)
    marker = blind.scrub(call)
    assert marker["dropped"] and marker["tokens"] == len(ids(tok, f"a {SECRET}")) + 1
    assert call.prompt_token_ids == [] and call.choices[0].token_ids == [] and call.choices[0].finish_reason == "stop"


def test_private_key_block_spanning_many_tokens(tok):
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n" + "abcd" * 100 + "\n-----END RSA PRIVATE KEY-----"
    call = call_of(ids(tok, f"file:\n{key}\ndone"), [])
    TokenRedactor(DEFAULT_REDACTIONS, tok).scrub(call)
    text = tok.decode(call.prompt_token_ids)
    assert "MIIE" not in text and "abcd" not in text and text.startswith("file:") and text.endswith("done")


def test_a_key_cut_short_is_found_once_the_rollout_showed_it(tok):
    """The model's answer ends mid-key (max_tokens): the prefix matches no pattern, but the gateway saw the
    whole key earlier in the rollout (or in the same call) and finds its prefix too, text and tokens."""
    from harnessrl.gateway.recorder import Recorder
    from harnessrl.redaction.text import Redactor

    rec = Recorder(None, Redactor(DEFAULT_REDACTIONS), tokens=TokenRedactor(DEFAULT_REDACTIONS, tok))  # type: ignore[arg-type]
    cut = SECRET[:15]  # "sk-live-4f9Qz7X": 12 key characters, below the pattern's 20
    first = call_of(ids(tok, f"repeat {SECRET}"), [ids(tok, f"ok {cut}")],
                    response={"choices": [{"message": {"content": f"ok {cut}"}}]},
                    request={"messages": [{"content": f"repeat {SECRET}"}]})
    rec._redacted(first)
    assert cut not in str(first.response) and cut not in tok.decode(first.choices[0].token_ids)
    later = call_of(ids(tok, f"you said {cut}"), [ids(tok, " fine")], response={"choices": []},
                    request={"messages": [{"content": f"you said {cut}"}]})
    rec._redacted(later)
    assert cut not in str(later.request) and cut not in tok.decode(later.prompt_token_ids)
    other_rollout = call_of(ids(tok, f"you said {cut}"), [ids(tok, " fine")], response={"choices": []},
                            request={"messages": [{"content": f"you said {cut}"}]})
    other_rollout.rollout_id = "another"
    rec._redacted(other_rollout)  # memory is per rollout: another rollout's text is its own
    assert cut in str(other_rollout.request)


def test_a_long_secret_is_redacted_without_being_remembered(tok):
    from harnessrl.gateway.recorder import KNOWN_MAX_CHARS, Recorder
    from harnessrl.redaction.text import Redactor

    rec = Recorder(None, Redactor(DEFAULT_REDACTIONS), tokens=TokenRedactor(DEFAULT_REDACTIONS, tok))  # type: ignore[arg-type]
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "abcd" * 60 + "\n-----END RSA PRIVATE KEY-----"
    assert len(key) > KNOWN_MAX_CHARS
    call = call_of(ids(tok, f"file: {key}"), [ids(tok, "ok")], response={"choices": []},
                   request={"messages": [{"content": f"file: {key}"}]})
    rec._redacted(call)
    assert "abcd" not in str(call.request) and "abcd" not in tok.decode(call.prompt_token_ids)
