"""Training on calls whose tokens held a secret: placeholders are never trained, the sample says so."""

from __future__ import annotations

from harnessrl.models import tiny_tokenizer
from harnessrl.redaction.text import DEFAULT_REDACTIONS
from harnessrl.redaction.tokens import TokenRedactor
from harnessrl.store.base import NewCall
from harnessrl.training.config import SampleConfig
from harnessrl.training.samples import build_samples
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens

SECRET = "sk-live-4f9Qz7XbT2mK8wR1nV6cY3hJ"
TOK = tiny_tokenizer()


def enc(text: str) -> list[int]:
    return TOK.encode(text, add_special_tokens=False)


def recorded(index: int, prompt: list[int], completion: list[int], redactor: TokenRedactor) -> Call:
    """A call as the gateway stores it: scrubbed by the real token redactor."""
    new = NewCall("r1", ApiKind.CHAT, CallStatus.OK, {}, {"choices": []}, prompt,
                  [ChoiceTokens(completion, [-0.25] * len(completion), "stop")], 0)
    marker = redactor.scrub(new)
    sampling = {"redacted": marker} if marker else {}
    return Call(rollout_id="r1", index=index, api=ApiKind.CHAT, status=CallStatus.OK, request={}, response=None,
                prompt_token_ids=new.prompt_token_ids, choices=new.choices, policy_version=0, sampling=sampling)


def two_turns(redactor: TokenRedactor) -> list[Call]:
    """The model prints the key in turn 1 (completion); the harness sends it back in turn 2 (prompt)."""
    p0, c0 = enc("Q: read .env\nA:"), enc(f" the key is {SECRET} done")
    p1 = p0 + c0 + enc("\nQ: thanks\nA:")
    return [recorded(0, p0, c0, redactor), recorded(1, p1, enc(" ok"), redactor)]


def test_placeholders_are_masked_and_counted():
    redactor = TokenRedactor(DEFAULT_REDACTIONS, TOK)
    calls = two_turns(redactor)
    marker = calls[0].sampling["redacted"]
    n = marker["completion"][0]
    assert n > 0 and calls[1].sampling["redacted"]["prompt"] == n  # same tokens, same placeholders: merged
    out = build_samples(calls, "g")
    (s,) = out.samples
    assert s.call_indices == [0, 1]  # the prefix still matches after redaction
    assert SECRET not in TOK.decode(s.token_ids)
    (start, end), = marker["completion_spans"][0]
    span0 = s.call_spans[0]
    masked = range(span0[0] + start, span0[0] + end)
    assert all(s.token_ids[i] == redactor.placeholder for i in masked)
    assert all(s.loss_mask[i] == 0 and s.behaviour_logprobs[i] == 0.0 for i in masked)
    trained = [i for i in range(*span0) if i not in masked] + list(range(*s.call_spans[1]))
    assert all(s.loss_mask[i] == 1 and s.behaviour_logprobs[i] == -0.25 for i in trained)
    assert s.redacted == n  # counted once, though the placeholders appear in both calls' arrays
    assert out.counts["redacted.calls"] == 2 and out.counts["redacted.completion_tokens_masked"] == n


def test_drop_policy_and_dropped_arrays():
    calls = two_turns(TokenRedactor(DEFAULT_REDACTIONS, TOK))
    out = build_samples(calls, "g", SampleConfig(redacted="drop"))
    assert out.samples == [] and out.counts["excluded.redacted"] == 2
    no_tokenizer = two_turns(TokenRedactor(DEFAULT_REDACTIONS, None))
    out = build_samples(no_tokenizer, "g")
    assert out.samples == [] and out.counts["excluded.redacted_dropped"] == 2


def test_a_completion_that_is_only_a_secret_trains_nothing():
    calls = [recorded(0, enc("Q: key?\nA:"), enc(SECRET), TokenRedactor(DEFAULT_REDACTIONS, TOK))]
    out = build_samples(calls, "g")
    assert out.samples == [] and out.counts["redacted.no_trained_tokens"] == 1


def test_unredacted_calls_unchanged():
    clean = [recorded(0, enc("Q: hi\nA:"), enc(" hello"), TokenRedactor(DEFAULT_REDACTIONS, TOK))]
    (s,) = build_samples(clean, "g").samples
    assert s.redacted == 0 and "redacted" not in clean[0].sampling and sum(s.loss_mask) == len(enc(" hello"))
