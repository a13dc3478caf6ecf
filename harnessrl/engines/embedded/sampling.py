"""Sampling parameters and the sampler: which token comes next, and its exact logprob.

The logprob reported for a sampled token is its log-probability under the distribution it was actually drawn
from: ``log_softmax(logits / temperature)`` with top-k / top-p applied as masks and the rest renormalized.
With top-k/top-p off (the RL default) this is exactly what a trainer recomputes with a forward pass at the same
temperature. Greedy requests (temperature 0) report ``log_softmax(logits)`` (temperature 1), the model's own
distribution, since a point mass would carry no information.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


class InvalidRequestError(ValueError):
    """A request the engine refuses (HTTP 400); ``code`` follows the OpenAI error codes where one exists."""

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


@dataclass
class SamplingParams:
    """Per-request sampling settings (OpenAI names, plus vLLM's ``top_k``/``stop_token_ids``/... extensions)."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    n: int = 1
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    top_logprobs: int = 0

    def validate(self) -> None:
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise InvalidRequestError(
                f"max_tokens must be at least 1, got {self.max_tokens}", param="max_tokens"
            )
        if self.temperature < 0:
            raise InvalidRequestError(
                f"temperature must be >= 0, got {self.temperature}", param="temperature"
            )
        if not 0 < self.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p}", param="top_p")
        if self.top_k < -1:
            raise InvalidRequestError(f"top_k must be -1, 0 or positive, got {self.top_k}", param="top_k")
        if not 1 <= self.n <= 128:
            raise InvalidRequestError(f"n must be between 1 and 128, got {self.n}", param="n")
        if not 0 <= self.top_logprobs <= 20:
            raise InvalidRequestError(
                f"top_logprobs must be between 0 and 20, got {self.top_logprobs}", param="top_logprobs"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def processed_logprobs(logits_V: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probabilities of the distribution a token is sampled from (fp32, -inf where masked).

    ``logits_V`` is ``[V]`` or ``[rows, V]`` (rows sharing ``params``); the result has its shape."""
    logits_V = logits_V.float()
    if params.greedy:
        return torch.log_softmax(logits_V, dim=-1)
    scaled = logits_V / params.temperature if params.temperature != 1.0 else logits_V
    if params.top_k > 0 and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    logp = torch.log_softmax(scaled, dim=-1)
    if params.top_p < 1.0:
        sorted_lp, order = torch.sort(logp, dim=-1, descending=True)
        cum = sorted_lp.exp().cumsum(-1)
        # keep the smallest prefix whose mass reaches top_p (the token that crosses it stays)
        drop_sorted = (cum - sorted_lp.exp()) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logp = torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)
    return logp


def _draw(logp_RV: torch.Tensor, generators: list[torch.Generator]) -> list[int]:
    """One token per row from ``exp(logp)`` by inverse CDF, each row's uniform from its own generator.

    An exact sampler like ``torch.multinomial``, at one batched cumulative sum instead of a multinomial
    call per row (those were a seventh of a 24-row decode step); a row's draw depends only on its
    logits and its generator, so seeded requests stay reproducible whatever else is in the batch."""
    cdf = logp_RV.double().exp().cumsum(-1)
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators]).to(cdf.device)
    x = (u * cdf[:, -1]).unsqueeze(-1)
    picked = torch.searchsorted(cdf, x, right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)
    return [int(t) for t in picked]


def sample_rows(
    logits_RV: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]
) -> list[tuple[int, float, list[tuple[int, float]]]]:
    """``(token_id, logprob, top_logprobs)`` for each row's next-token logits, under that row's settings.

    Rows with the same temperature/top-k/top-p share one log-softmax (a decode step's rows, usually all)."""
    out: list[tuple[int, float, list[tuple[int, float]]] | None] = [None] * len(params)
    groups: dict[tuple[float, int, float], list[int]] = {}
    for row, p in enumerate(params):
        groups.setdefault((p.temperature, p.top_k, p.top_p), []).append(row)
    for rows in groups.values():
        first = params[rows[0]]
        index = torch.tensor(rows, device=logits_RV.device)
        logp = processed_logprobs(logits_RV.index_select(0, index), first)
        if first.greedy:
            tokens = [int(t) for t in torch.argmax(logits_RV.index_select(0, index), dim=-1)]
        else:
            tokens = _draw(logp, [generators[r] for r in rows])
        chosen = logp.gather(1, torch.tensor(tokens, device=logp.device)[:, None]).squeeze(1).tolist()
        for k, row in enumerate(rows):
            top: list[tuple[int, float]] = []
            if params[row].top_logprobs:
                values, ids = torch.topk(logp[k], params[row].top_logprobs)
                top = [(int(i), float(v)) for i, v in zip(ids, values, strict=True)]
            out[row] = (tokens[k], float(chosen[k]), top)
    return [o for o in out if o is not None]

