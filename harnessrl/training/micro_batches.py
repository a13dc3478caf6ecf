"""Micro-batches by token budget: packed without padding, or length-bucketed padding as a fallback.

Packed: the samples of a micro-batch are concatenated into one row and ``position_ids`` restart at 0 for
each. With no attention mask, transformers detects the restarts and builds a block-diagonal causal mask
(sdpa/eager), and flash-attention uses varlen kernels, so no token attends across samples and no compute
is spent on padding. ``tests/unit/training/test_micro_batches.py`` checks packed logprobs equal unpacked ones.

One step is one optimizer update over all its micro-batches, so micro-batching never splits a group or a
rollout in a way that matters: advantages and token weights are fixed for the whole batch beforehand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from harnessrl.training.samples import common_prefix_length
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
    num_tokens: int  # tokens of the samples (a shared prefix counts once per sample)
    #: Packed with shared prefixes: (prefix_start, prefix_end, [(suffix_start, suffix_end), ...]) per unit.
    blocks: list[tuple[int, int, list[tuple[int, int]]]] | None = None
    #: Sampling temperature of each trained token (None: all 1.0); logits are divided by it.
    temperatures: torch.Tensor | None = None

    @property
    def computed_tokens(self) -> int:
        """Tokens the model actually runs (padding included, shared prefixes once)."""
        return int(self.input_ids.numel())

    @property
    def padding_tokens(self) -> int:
        return 0 if self.attention_mask is None else int((self.attention_mask == 0).sum())

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


@dataclass(slots=True)
class _Unit:
    """Samples packed together behind one shared prefix (``prefix_len == 0``: a single sample alone)."""

    members: list[int]
    prefix_len: int = 0

    def length(self, lengths: Sequence[int]) -> int:
        return self.prefix_len + sum(lengths[i] - self.prefix_len for i in self.members)


def _first_trained(s: Sample) -> int:
    return next((t for t, m in enumerate(s.loss_mask) if m), len(s.token_ids))


def _prefix_units(samples: Sequence[Sample], budget: int, min_shared: int) -> list[_Unit]:
    """Cluster each group's samples by a shared context prefix (the task prompt the n attempts share).

    The prefix is cut before any sample's first trained token, so every shared token is context; units
    are kept within the token budget (a prefix is repeated in each chunk when a group does not fit).
    """
    by_group: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        by_group.setdefault(s.group_id, []).append(i)
    lengths = [len(s.token_ids) for s in samples]
    units: list[_Unit] = []
    for remaining in by_group.values():
        while remaining:
            anchor, rest = remaining[0], []
            members, p = [anchor], _first_trained(samples[anchor])
            for j in remaining[1:]:
                k = min(common_prefix_length(samples[anchor].token_ids, samples[j].token_ids),
                        _first_trained(samples[j]), p)
                if k >= min_shared:
                    members.append(j)
                    p = k
                else:
                    rest.append(j)
            remaining = rest
            if len(members) == 1 or p < min_shared:
                units.extend(_Unit([i]) for i in members)
                continue
            chunk: list[int] = []
            for i in members:
                if chunk and _Unit([*chunk, i], p).length(lengths) > budget:
                    units.append(_Unit(chunk, p) if len(chunk) > 1 else _Unit(chunk))
                    chunk = []
                chunk.append(i)
            units.append(_Unit(chunk, p) if len(chunk) > 1 else _Unit(chunk))
    return units


def make_micro_batches(
    samples: Sequence[Sample],
    weights: Sequence[Sequence[float]],
    token_budget: int,
    mode: str = "packed",
    pad_token_id: int = 0,
    share_prefix_min: int | None = None,
) -> list[MicroBatch]:
    """Group samples into micro-batches of at most ``token_budget`` tokens (padding included).

    ``share_prefix_min``: in packed mode, samples of a group that share at least this many leading context
    tokens are packed behind one copy of that prefix (needs the ``harnessrl_varlen`` attention, which
    lets each suffix attend to the shared prefix); None packs every sample whole.
    """
    lengths = [len(s.token_ids) for s in samples]
    if mode != "packed":
        return [_build(samples, weights, [_Unit([i]) for i in idx], mode, pad_token_id)
                for idx in _padded_bins(lengths, token_budget)]
    if share_prefix_min is None:
        units = [_Unit([i]) for i in range(len(samples))]
    else:
        units = _prefix_units(samples, token_budget, max(share_prefix_min, 1))
    bins = _bins([u.length(lengths) for u in units], token_budget)
    return [_build(samples, weights, [units[u] for u in b], mode, pad_token_id) for b in bins]


def _build(samples: Sequence[Sample], weights: Sequence[Sequence[float]], units: list[_Unit], mode: str,
           pad: int) -> MicroBatch:
    rows_ids: list[list[int]] = []
    rows_pos: list[list[int]] = []
    lr: list[int] = []
    lc: list[int] = []
    tgt: list[int] = []
    beh: list[float] = []
    temps: list[float] = []
    adv: list[float] = []
    wts: list[float] = []
    blocks: list[tuple[int, int, list[tuple[int, int]]]] = []
    order: list[int] = []
    for unit in units:
        if mode == "packed" and rows_ids:
            row = 0
        else:
            rows_ids.append([])
            rows_pos.append([])
            row = len(rows_ids) - 1
        ids, pos = rows_ids[row], rows_pos[row]
        p = unit.prefix_len
        start = len(ids)
        if p:
            ids.extend(samples[unit.members[0]].token_ids[:p])
            pos.extend(range(p))
        suffixes: list[tuple[int, int]] = []
        for i in unit.members:
            s = samples[i]
            order.append(i)
            base = len(ids)  # row index of sample position p (suffix start)
            ids.extend(s.token_ids[p:])
            pos.extend(range(p, len(s.token_ids)))
            if p:
                suffixes.append((base, len(ids)))
            tok_adv = s.token_advantages
            for t in range(max(p, 1), len(s.token_ids)):
                if s.loss_mask[t]:
                    lr.append(row)
                    lc.append(base + (t - 1 - p) if t - 1 >= p else start + t - 1)
                    tgt.append(s.token_ids[t])
                    beh.append(s.behaviour_logprobs[t])
                    temps.append(s.temperatures[t] if s.temperatures is not None else 1.0)
                    adv.append(tok_adv[t] if tok_adv is not None else s.advantage)
                    wts.append(weights[i][t])
        blocks.append((start, start + p, suffixes) if p else (start, len(ids), []))
    width = max(len(r) for r in rows_ids)
    mask = None
    if mode != "packed":
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows_ids], dtype=torch.long)
        rows_ids = [r + [pad] * (width - len(r)) for r in rows_ids]
        rows_pos = [p + [0] * (width - len(p)) for p in rows_pos]
    shared = any(suffixes for _, _, suffixes in blocks)
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
        sample_indices=order,
        temperatures=torch.tensor(temps, dtype=torch.float32) if any(t != 1.0 for t in temps) else None,
        num_tokens=sum(len(samples[i].token_ids) for i in order),
        blocks=blocks if shared else None,
    )
