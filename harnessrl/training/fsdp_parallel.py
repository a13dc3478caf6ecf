"""Data-parallel training under ``torchrun``: FSDP2 sharding, a deterministic share of micro-batches per rank.

With ``WORLD_SIZE > 1`` (set by ``torchrun``) the trainer joins a process group (nccl on GPU, gloo on
CPU), shards the model with PyTorch's ``fully_shard`` (one unit per decoder layer plus the root), and each
rank runs every ``world_size``-th micro-batch of the step. Every rank builds the *whole* batch's token
weights and micro-batches first (cheap), so the loss is exactly the single-process one: weights sum to 1
over the batch, and gradients are reduce-scattered as a SUM (divide factor 1), not a mean. Ranks with one
micro-batch fewer run a zero-weight two-token dummy so every rank joins the same number of collectives.
With one process, ``DistContext`` is a no-op and nothing is sharded: the same code path.

``harnessrl.training.fsdp_smoke`` runs one such step on the tiny model (docs/distributed.md).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.distributed as dist

from harnessrl.training.micro_batches import MicroBatch

logger = logging.getLogger(__name__)


class DistributedError(RuntimeError):
    """A distributed setup harnessrl cannot train with; the message says what to change."""


@dataclass(slots=True)
class DistContext:
    """This process's place in the job. ``world_size == 1``: plain single-process training."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes metrics, checkpoints and publishes weights."""
        return self.rank == 0

    # -- setup ------------------------------------------------------------------------------------------
    @classmethod
    def from_env(cls, device: torch.device) -> DistContext:
        """Join the process group ``torchrun`` describes (WORLD_SIZE/RANK/LOCAL_RANK), if there is one."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dev_id = torch.device("cuda", local) if device.type == "cuda" else None
            if dev_id is not None:
                torch.cuda.set_device(dev_id)
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30), device_id=dev_id)
        if dist.get_world_size() != world:
            raise DistributedError(f"process group has {dist.get_world_size()} ranks but WORLD_SIZE={world}")
        return cls(rank=rank, world_size=world, local_rank=local)

    def device_for(self, device: torch.device) -> torch.device:
        """On GPU each rank trains on its own card (``cuda:LOCAL_RANK``)."""
        if self.enabled and device.type == "cuda" and device.index is None:
            return torch.device("cuda", self.local_rank)
        return device

    def shard(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``fully_shard`` each decoder layer and the root; gradients are summed across ranks, not averaged."""
        if not self.enabled:
            return model
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import FSDPModule, fully_shard

        mesh = init_device_mesh(device.type, (self.world_size,))  # gloo on CPU even where GPUs exist
        layers = _decoder_layers(model)
        for layer in layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for m in model.modules():
            if isinstance(m, FSDPModule):
                m.set_gradient_divide_factor(1.0)  # weights already sum to 1 over the whole batch
                m.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no PREMUL_SUM)
        logger.info("rank %d/%d: FSDP over %d layer units", self.rank, self.world_size, len(layers))
        return model

    # -- the step -------------------------------------------------------------------------------------
    def share(self, mbs: Sequence[MicroBatch]) -> list[MicroBatch]:
        """This rank's micro-batches: every ``world_size``-th one, padded with a dummy to an equal count.

        ``make_micro_batches`` orders bins largest first, so striding spreads tokens evenly; every rank
        sees the same list, so the split needs no communication.
        """
        if not self.enabled:
            return list(mbs)
        mine = list(mbs[self.rank :: self.world_size])
        per_rank = -(-len(mbs) // self.world_size)
        return mine + [dummy_micro_batch()] * (per_rank - len(mine))

    def all_reduce_sums(self, sums: dict[str, float], keys: Sequence[str]) -> None:
        """Sum the step's metric sums over ranks in place (float64: token counts stay exact)."""
        if not self.enabled:
            return
        t = torch.tensor([float(sums.get(k, 0.0)) for k in keys], dtype=torch.float64)
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t)
        for k, v in zip(keys, t.tolist(), strict=True):
            sums[k] = int(v) if k.endswith("tokens") else v

    def check_same_batch(self, samples: Sequence[Any]) -> None:
        """Every rank must step on the same batch (the split relies on it); a cheap fingerprint check."""
        if not self.enabled:
            return
        fp = 0
        for s in samples:
            fp = (fp * 1_000_003 + len(s.token_ids) * 7919 + sum(s.token_ids) + int(s.advantage * 1e6)) % (1 << 61)
        t = torch.tensor([fp, -fp], dtype=torch.int64)
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if int(t[0]) != -int(t[1]):
            raise DistributedError(
                "ranks were given different batches; every rank must call Trainer.step with the same samples "
                "(build the batch from the same rollouts on each rank, or broadcast it from rank 0)"
            )

    def grad_norm(self, norm: torch.Tensor) -> float:
        """``clip_grad_norm_`` over sharded (DTensor) gradients returns a DTensor; make it a number."""
        full = getattr(norm, "full_tensor", None)
        return float(full() if callable(full) else norm)

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """``model.state_dict()`` with full CPU tensors on rank 0 (collective; ``{}`` on other ranks)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full: dict[str, Any] = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        first: dict[int, str] = {}
        for name, param in model.named_parameters(remove_duplicate=False):  # tied weights: one tensor again
            kept = first.setdefault(id(param), name)
            if kept != name and kept in full and name in full:
                full[name] = full[kept]
        return full

    @contextlib.contextmanager
    def full_model(self, model: torch.nn.Module) -> Iterator[torch.nn.Module]:
        """Every rank gathers the weights (collective); inside, rank 0's ``model.state_dict()`` is full.

        Publishers read weights through ``state_dict()`` (``save_pretrained``, peft's adapter export), and
        FSDP's own ``state_dict`` returns shards, so rank 0's model answers with the gathered CPU copy
        until the block ends. Other ranks only take part in the gather.
        """
        if not self.enabled:
            yield model
            return
        full = self.full_state_dict(model)
        if self.is_main:
            model.state_dict = lambda *args, **kwargs: dict(full)  # type: ignore[method-assign,assignment]
        try:
            yield model
        finally:
            if self.is_main:
                del model.state_dict
            dist.barrier()

    def full_optimizer_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The optimizer state gathered to rank 0 (collective; ``{}`` elsewhere) in ``Optimizer.state_dict``
        form (parameters by index), so checkpoints load the same with one process or many.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        osd: Any = get_optimizer_state_dict(model, optimizer,
                                       options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if not osd:
            return {}
        index = {fqn: i for i, fqn in enumerate(f for g in osd["param_groups"] for f in g["params"])}
        return {"state": {index[f]: v for f, v in osd["state"].items()},
                "param_groups": [{**g, "params": [index[f] for f in g["params"]]} for g in osd["param_groups"]]}

    def load_full_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        tensors: dict[str, torch.Tensor], optimizer_state: dict[str, Any]) -> None:
        """Every rank keeps its shard of full (checkpoint) weights and optimizer state."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        names = {id(p): n for n, p in model.named_parameters()}
        fqns = [names[id(p)] for g in optimizer.param_groups for p in g["params"]]
        by_name = {"state": {fqns[i]: v for i, v in optimizer_state["state"].items()},
                   "param_groups": [{**g, "params": [fqns[i] for i in g["params"]]}
                                    for g in optimizer_state["param_groups"]]}
        opts = StateDictOptions(full_state_dict=True, strict=False)
        set_model_state_dict(model, cast(Any, tensors), options=opts)
        set_optimizer_state_dict(model, optimizer, cast(Any, by_name), options=opts)

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks to shard one by one (a transformers model's ``_no_split_modules`` classes)."""
    get_base = getattr(model, "get_base_model", None)  # peft wrapper
    base = get_base() if callable(get_base) else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in base.modules() if type(m).__name__ in names]
    if not layers:
        raise DistributedError(
            f"cannot find the decoder layers of {type(base).__name__} (no _no_split_modules); "
            "FSDP needs a transformers causal LM"
        )
    return layers


def dummy_micro_batch() -> MicroBatch:
    """Two tokens, one zero-weight target: runs forward/backward (the collectives) and adds nothing."""
    z = torch.zeros(1, dtype=torch.float32)
    return MicroBatch(
        input_ids=torch.zeros(1, 2, dtype=torch.long), position_ids=torch.arange(2)[None], attention_mask=None,
        logit_rows=torch.zeros(1, dtype=torch.long), logit_cols=torch.zeros(1, dtype=torch.long),
        target_ids=torch.zeros(1, dtype=torch.long), behaviour_logprobs=z, advantages=z, weights=z,
        sample_indices=[], num_tokens=0,
    )


def is_dummy(mb: MicroBatch) -> bool:
    return not mb.sample_indices
