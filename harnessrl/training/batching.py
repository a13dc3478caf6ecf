"""Micro-batches by token budget: packed without padding, or length-bucketed padding as a fallback.

Packed: the samples of a micro-batch are concatenated into one row and ``position_ids`` restart at 0 for
each. With no attention mask, transformers detects the restarts and builds a block-diagonal causal mask
(sdpa/eager), and flash-attention uses varlen kernels, so no token attends across samples and no compute
is spent on padding. ``tests/unit/training/test_batching.py`` checks packed logprobs equal unpacked ones.

One step is one optimizer update over all its micro-batches, so micro-batching never splits a group or a
rollout in a way that matters: advantages and token weights are fixed for the whole batch beforehand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from harnessrl.types import Sample


@dataclass(slots=True)
class MicroBatch:
    """Model inputs plus, for every trained token, where its logit is and what it is scored against.

    ``logit_rows``/``logit_cols`` index the logits that *predict* each trained token (position t-1).
    """

    input_ids: torch.Tensor  # [B, T]
    position_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor | None  # [B, T] in padded mode, None when packed
    logit_rows: torch.Tensor  # [K]
    logit_cols: torch.Tensor  # [K]
    target_ids: torch.Tensor  # [K]
    behaviour_logprobs: torch.Tensor  # [K]
    advantages: torch.Tensor  # [K]
    weights: torch.Tensor  # [K]
    sample_indices: list[int]
    num_tokens: int  # real (non-padding) tokens

    @property
    def num_trained(self) -> int:
        return int(self.target_ids.numel())


def _bins(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """First-fit decreasing: few micro-batches, deterministic; an over-budget sample gets its own."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(budget - lengths[i])
    return bins


def _padded_bins(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Length-bucketed rows: sorted by length so padding is small; rows * longest <= budget."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    for i in order:
        if bins and lengths[bins[-1][0]] * (len(bins[-1]) + 1) <= budget:
            bins[-1].append(i)
        else:
            bins.append([i])
    return bins


def make_micro_batches(
    samples: Sequence[Sample],
    weights: Sequence[Sequence[float]],
    token_budget: int,
    mode: str = "packed",
    pad_token_id: int = 0,
) -> list[MicroBatch]:
    """Group samples into micro-batches of at most ``token_budget`` tokens (padding included)."""
    lengths = [len(s.token_ids) for s in samples]
    groups = _bins(lengths, token_budget) if mode == "packed" else _padded_bins(lengths, token_budget)
    return [_build(samples, weights, idx, mode, pad_token_id) for idx in groups]


def _build(samples: Sequence[Sample], weights: Sequence[Sequence[float]], idx: list[int], mode: str,
           pad: int) -> MicroBatch:
    rows_ids: list[list[int]] = []
    rows_pos: list[list[int]] = []
    lr: list[int] = []
    lc: list[int] = []
    tgt: list[int] = []
    beh: list[float] = []
    adv: list[float] = []
    wts: list[float] = []
    offset = 0
    for i in idx:
        s = samples[i]
        if mode == "packed":
            if not rows_ids:
                rows_ids.append([])
                rows_pos.append([])
            row = 0
        else:
            rows_ids.append([])
            rows_pos.append([])
            row, offset = len(rows_ids) - 1, 0
        rows_ids[row].extend(s.token_ids)
        rows_pos[row].extend(range(len(s.token_ids)))
        tok_adv = s.token_advantages
        for t in range(1, len(s.token_ids)):
            if s.loss_mask[t]:
                lr.append(row)
                lc.append(offset + t - 1)
                tgt.append(s.token_ids[t])
                beh.append(s.behaviour_logprobs[t])
                adv.append(tok_adv[t] if tok_adv is not None else s.advantage)
                wts.append(weights[i][t])
        offset += len(s.token_ids)
    width = max(len(r) for r in rows_ids)
    mask = None
    if mode != "packed":
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows_ids], dtype=torch.long)
        rows_ids = [r + [pad] * (width - len(r)) for r in rows_ids]
        rows_pos = [p + [0] * (width - len(p)) for p in rows_pos]
    return MicroBatch(
        input_ids=torch.tensor(rows_ids, dtype=torch.long),
        position_ids=torch.tensor(rows_pos, dtype=torch.long),
        attention_mask=mask,
        logit_rows=torch.tensor(lr, dtype=torch.long),
        logit_cols=torch.tensor(lc, dtype=torch.long),
        target_ids=torch.tensor(tgt, dtype=torch.long),
        behaviour_logprobs=torch.tensor(beh, dtype=torch.float32),
        advantages=torch.tensor(adv, dtype=torch.float32),
        weights=torch.tensor(wts, dtype=torch.float32),
        sample_indices=list(idx),
        num_tokens=sum(len(samples[i].token_ids) for i in idx),
    )
