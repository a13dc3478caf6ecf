"""torchrun worker: ranks pass different (or, with ``same``, equal) batches to ``check_same_batch``."""

import sys

import torch
import torch.distributed as dist

from harnessrl.training.fsdp_parallel import DistContext, DistributedError
from harnessrl.types import Sample, SampleFidelity


def main() -> None:
    ctx = DistContext.from_env(torch.device("cpu"))
    rank = 0 if sys.argv[1] == "same" else ctx.rank
    samples = [Sample(rollout_id="r", group_id="g", token_ids=[1, 2, 3 + rank], loss_mask=[0, 1, 1],
                      behaviour_logprobs=[0.0] * 3, policy_versions=[0], call_indices=[0],
                      fidelity=SampleFidelity.EXACT, advantage=1.0)]
    try:
        ctx.check_same_batch(samples)
        print(f"rank {ctx.rank}: same", flush=True)
    except DistributedError as exc:
        print(f"rank {ctx.rank}: refused: {exc}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
