"""Variable-length ("varlen") attention for packed micro-batches without flash-attention.

Packing several samples into one row saves the padding, but with sdpa transformers turns the restarting
``position_ids`` into a dense block-diagonal ``T x T`` mask: the kernel still computes every masked block,
so a 2048-token row of eight 256-token samples does ~8x the attention work of the samples alone, and on
a CPU that costs more than the padding saved. This attention function, registered with transformers as
``harnessrl_varlen``, runs causal sdpa on each packed sample separately (boundaries from the
flash-attention kwargs ``cu_seq_lens_q``), which is what flash-attention's varlen kernel does on GPUs.
Without those kwargs it is plain sdpa (same masks), so generation with the same module is unaffected.

It also runs *shared-prefix* packing (kwarg ``harnessrl_blocks``): the n attempts of a task start with
the same prompt, so a micro-batch holds that prompt once and each attempt's remainder attends to it.

The pieces are cut with ``torch.split``, not by slicing: the backward of a slice writes its gradient into a
zero tensor the size of the whole row, once per piece and layer (~8% of a shared-prefix step's CPU went to
those fills and adds in a profile of a ``benchmarks/trainer_throughput.py`` agent step), while a split's
backward is one concatenation.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

VARLEN = "harnessrl_varlen"
FLASH = ("flash_attention_2", "flash_attention_3")
_registered = False


def varlen_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention per packed sequence; ``query``/``key``/``value`` are ``[1, heads, T, dim]``."""
    blocks = kwargs.get("harnessrl_blocks")
    if blocks is not None and query.shape[0] == 1:
        return _shared_prefix_attention(module, query, key, value, blocks, dropout, scaling), None
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None or query.shape[0] != 1 or kwargs.get("sliding_window") or getattr(module, "sliding_window", None):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    gqa = getattr(module, "num_key_value_groups", 1) > 1  # sdpa shares each key/value head, no repeated copy
    bounds = cu.tolist()
    sizes = [e - s for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
    pieces = zip(*(_split(t, sizes, bounds[0]) for t in (query, key, value)), strict=True)
    outs = [F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa)
            for (q, k, v), n in zip(pieces, sizes, strict=True) if n]
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


def _split(t: torch.Tensor, sizes: list[int], start: int = 0) -> tuple[torch.Tensor, ...]:
    """``t``'s consecutive pieces of ``sizes`` along the sequence (dim 2), from ``start``; what lies
    before ``start`` or after the last piece is dropped."""
    rest = t.shape[2] - start - sum(sizes)
    parts = torch.split(t, [start, *sizes, rest], dim=2)
    return parts[1:len(sizes) + 1]


def _shared_prefix_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             blocks: list[tuple[int, int, list[tuple[int, int]]]], dropout: float,
                             scaling: float | None) -> torch.Tensor:
    """Each block's prefix attends causally to itself; each suffix to the whole prefix and itself causally.

    This is exactly the attention each sample would get alone (prefix + its suffix), with the prefix
    computed once; gradients from every suffix flow back into the shared prefix.
    """
    gqa = getattr(module, "num_key_value_groups", 1) > 1  # sdpa shares each key/value head, no repeated copy
    spans = [span for a, b, suffixes in blocks for span in [(a, b), *suffixes]]
    if any(s != e for (_, e), (s, _) in zip(spans, spans[1:], strict=False)):
        raise ValueError(f"shared-prefix blocks must lie end to end in the packed row: {spans}")
    sizes = [e - s for s, e in spans]
    qs, ks, vs = (_split(t, sizes, spans[0][0]) for t in (query, key, value))
    outs = []
    i = 0
    for a, b, suffixes in blocks:
        p = i  # the prefix's piece
        outs.append(F.scaled_dot_product_attention(qs[p], ks[p], vs[p], dropout_p=dropout, is_causal=True,
                                                   scale=scaling, enable_gqa=gqa))
        for c, d in suffixes:
            i += 1
            kk = torch.cat([ks[p], ks[i]], dim=2)
            vv = torch.cat([vs[p], vs[i]], dim=2)
            # bottom-right aligned causal mask: suffix token j sees the prefix and suffix tokens <= j
            allowed = torch.ones(d - c, (b - a) + (d - c), dtype=torch.bool, device=query.device).tril(b - a)
            outs.append(F.scaled_dot_product_attention(qs[i], kk, vv, attn_mask=allowed, dropout_p=dropout,
                                                       scale=scaling, enable_gqa=gqa))
        i += 1
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous()


def register_varlen_attention() -> str:
    """Register ``harnessrl_varlen`` with transformers (attention and sdpa-style masks); returns the name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(VARLEN, varlen_sdpa_forward)
        AttentionMaskInterface.register(VARLEN, sdpa_mask)
        _registered = True
    return VARLEN


def varlen_kwargs(position_ids: torch.Tensor) -> dict[str, Any]:
    """Flash-attention varlen kwargs for one packed row (``position_ids`` restart at 0 per sample)."""
    pos = position_ids.reshape(-1)
    starts = torch.nonzero(pos == 0).reshape(-1)
    cu = torch.cat([starts, torch.tensor([pos.numel()], device=pos.device)]).to(torch.int32)
    longest = int((cu[1:] - cu[:-1]).max())
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}
