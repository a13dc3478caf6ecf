"""Token logprobs of a micro-batch under a transformers causal LM.

Only the positions that predict trained tokens go through the LM head (``logits_to_keep`` with an index
tensor): agent prompts are mostly context, and the vocabulary projection is the largest activation, so
this saves most of the head's compute and memory. Models without ``logits_to_keep`` fall back to full
logits.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any

import torch

from harnessrl.training.attention import FLASH, VARLEN, varlen_kwargs
from harnessrl.training.micro_batches import MicroBatch


@functools.cache
def _accepts_logits_to_keep(cls: Any) -> bool:  # a model class (cached by class)
    return "logits_to_keep" in inspect.signature(cls.forward).parameters


def _base(model: torch.nn.Module) -> torch.nn.Module:
    get_base = getattr(model, "get_base_model", None)  # peft wrapper
    return get_base() if callable(get_base) else model


def token_logprobs(
    model: torch.nn.Module,
    mb: MicroBatch,
    device: torch.device,
    autocast_dtype: torch.dtype | None = None,
    with_entropy: bool = False,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob of each trained token of ``mb`` (and the policy entropy there: without gradient for the
    metric, with it when ``entropy_grad``, for an entropy bonus in the loss)."""
    kwargs: dict[str, object] = {
        "input_ids": mb.input_ids.to(device),
        "position_ids": mb.position_ids.to(device),
        "use_cache": False,
    }
    if mb.attention_mask is not None:
        kwargs["attention_mask"] = mb.attention_mask.to(device)
    rows, cols = mb.logit_rows.to(device), mb.logit_cols.to(device)
    keep = mb.attention_mask is None and mb.input_ids.shape[0] == 1 and _accepts_logits_to_keep(
        type(_base(model))  # type: ignore[arg-type]  # a class hashes by identity
    )
    if keep:
        kwargs["logits_to_keep"] = cols
    impl = getattr(getattr(_base(model), "config", None), "_attn_implementation", None)
    if mb.blocks is not None:
        if impl != VARLEN:
            raise ValueError(f"shared-prefix micro-batches need the {VARLEN} attention, the model uses {impl}")
        kwargs["harnessrl_blocks"] = mb.blocks
    elif mb.attention_mask is None and mb.input_ids.shape[0] == 1 and (impl == VARLEN or impl in FLASH):
        kwargs.update(varlen_kwargs(kwargs["position_ids"]))  # type: ignore[arg-type]
    ctx = (
        torch.autocast(device_type=device.type, dtype=autocast_dtype)
        if autocast_dtype is not None
        else contextlib.nullcontext()
    )
    with ctx:
        logits = model(**kwargs).logits
    logits = (logits[0] if keep else logits[rows, cols]).float()
    if mb.temperatures is not None:  # score under the tempered distribution the engine sampled from
        logits = logits / mb.temperatures.to(device)[:, None]
    targets = mb.target_ids.to(device)
    lp = torch.log_softmax(logits, dim=-1)  # one fused pass over the vocabulary, shared with the entropy
    logp = lp.gather(-1, targets[:, None])[:, 0]
    entropy = None
    if with_entropy or entropy_grad:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            ent_lp = lp if entropy_grad else lp.detach()
            entropy = -(ent_lp.exp() * ent_lp).sum(-1)
    return logp, entropy
