"""Helpers for training tests: a tiny random Llama (fast on 2 CPU cores) and sample builders."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens, Sample, SampleFidelity

VOCAB = 97


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, attn_implementation="sdpa",
    )
    return LlamaForCausalLM(cfg).float()



def make_call(index: int, prompt: list[int], completion: list[int], *, status: CallStatus = CallStatus.OK,
              rollout_id: str = "r1", version: int = 0, logprobs: list[float] | None = None,
              extra_choices: list[list[int]] | None = None) -> Call:
    lp = logprobs if logprobs is not None else [-0.5 - 0.01 * i for i in range(len(completion))]
    choices = [ChoiceTokens(token_ids=completion, logprobs=lp)] if completion or extra_choices else []
    for c in extra_choices or []:
        choices.append(ChoiceTokens(token_ids=c, logprobs=[-1.0] * len(c)))
    return Call(rollout_id=rollout_id, index=index, api=ApiKind.CHAT, status=status, request={}, response=None,
                prompt_token_ids=prompt, choices=choices, policy_version=version)


def make_sample(tokens: list[int], mask: list[int], *, rollout_id: str = "r1", group_id: str = "g",
                advantage: float = 1.0, behaviour: list[float] | None = None) -> Sample:
    beh = behaviour if behaviour is not None else [-1.0 if m else 0.0 for m in mask]
    return Sample(rollout_id=rollout_id, group_id=group_id, token_ids=tokens, loss_mask=mask,
                  behaviour_logprobs=beh, policy_versions=[0], call_indices=[0], fidelity=SampleFidelity.EXACT,
                  advantage=advantage)


def with_own_behaviour(model: torch.nn.Module, samples: list[Sample], shift: float = 0.0) -> list[Sample]:
    """``samples`` with behaviour logprobs equal to ``model``'s own at each trained token, plus ``shift``
    (0: an on-policy batch; otherwise as if another version had served them)."""
    import dataclasses

    from harnessrl.training.forward import token_logprobs
    from harnessrl.training.losses import token_weights
    from harnessrl.training.micro_batches import make_micro_batches

    out = []
    for mb in make_micro_batches(samples, token_weights(samples, "token"), 10_000):
        with torch.no_grad():
            lp, _ = token_logprobs(model, mb, torch.device("cpu"))
        k = 0
        for i in mb.sample_indices:
            s = samples[i]
            beh = [0.0] * len(s.token_ids)
            for t in range(1, len(s.token_ids)):
                if s.loss_mask[t]:
                    beh[t] = float(lp[k]) + shift
                    k += 1
            out.append(dataclasses.replace(s, behaviour_logprobs=beh))
    return out
