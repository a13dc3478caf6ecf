"""``harnessrl train`` with ``[run] source = "production"``: serve a deployment, train off-policy on its
closed sessions, offer each update to the canary (the loop's parts: ``production/train.py``)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from harnessrl.config import HarnessConfig
from harnessrl.drivers.lifecycle import open_run_store
from harnessrl.production.canary_state import canary_state
from harnessrl.production.train import CandidateSink, ProductionTrainer, off_policy_config
from harnessrl.stack import Stack
from harnessrl.store.base import NotFound, Store
from harnessrl.weights.checkpoints import latest_checkpoint


@dataclass
class ProductionSummary:
    """What a production run did: its updates and what the canary decided about each (``harnessrl train``
    prints ``held_out_line``)."""

    run_id: str
    deployment: str
    steps: int
    verdicts: list[str]

    def held_out_line(self) -> str:
        return (f"deployment {self.deployment}: {self.steps} updates; canary: "
                f"{', '.join(self.verdicts) or 'no candidate decided in this run'}")

    def cost_lines(self) -> list[str]:
        """None yet: a production run does not record its cost (harnessrl/run_cost.py covers train and sft)."""
        return []


async def train_production(config: HarnessConfig, console: Console | None = None) -> ProductionSummary:
    """``harnessrl train`` with ``[run] source = "production"``: serve, wait for closed windows, train
    ``[run] steps`` updates, each through the canary."""
    console = console or Console(stderr=True, soft_wrap=True)
    pt = config.production.training
    config = config.model_copy(update={"training": off_policy_config(config.training, pt.tis_cap)})
    name = config.run.deployment
    assert name is not None  # the config validator asks for it
    run_dir = config.run_dir
    store = open_run_store(config)  # the run prologue train and sft share too (harnessrl/drivers/lifecycle.py)
    try:
        ckpt = latest_checkpoint(run_dir)
        # The checkpoint is loaded here, not by the stack: the stack would serve it to every session, and
        # the latest update may be a candidate the canary has not promoted.
        stack = Stack.start(config, store, run_id=None, train=True)
        sink = None
        try:
            if ckpt is not None:
                stack.trainer.load_checkpoint(ckpt)
            try:
                loop = ProductionTrainer(store, stack.trainer, name, pt)
            except NotFound:
                raise ValueError(f"deployment {name!r} does not exist: declare [production.deployments.{name}] "
                                 "or create it with POST /admin/deployments") from None
            sink = CandidateSink(stack.gateway_url, stack.admin_token, store, name)
            state = canary_state(store, name)  # type: ignore[arg-type]
            if state.running and state.candidate_version == stack.trainer.policy_version:
                sink.pending = state.candidate_version  # offered before a restart: wait for its decision
            else:
                loop.settle(state.stable_version)  # the latest update was rolled back while we were away
            console.print(f"[bold]harnessrl train[/] (production) deployment {name}: gateway {stack.gateway_url}"
                          f"/p/{name}/v1; {stack.trainer.step_count} of {config.run.steps} updates done")
            verdicts = await _loop(config, stack, store, loop, sink, console)
            return ProductionSummary(loop.deployment.run_id, name, stack.trainer.step_count, verdicts)
        except BaseException:
            stack.close(failed=True)
            raise
        finally:
            if sink is not None:
                await sink.aclose()
            stack.close()
    finally:
        store.close()


async def _loop(config: HarnessConfig, stack: Any, store: Store, loop: ProductionTrainer, sink: CandidateSink,
                console: Console) -> list[str]:
    """Updates until ``[run] steps``, each offered to the canary and decided before the next; the run ends
    once the last candidate is decided. The gateway closes feedback windows meanwhile (``WindowCloser``)."""
    pt, trainer = config.production.training, stack.trainer
    direct = False
    offered, waiting = sink.pending, False
    verdicts: list[str] = []
    while True:
        done, stable = sink.decided()
        if not done:
            if not waiting:
                console.print(f"waiting for the canary's decision on v{offered}")
                waiting = True
            await asyncio.sleep(pt.poll_s)
            continue
        if offered is not None:
            rolled_back = await asyncio.to_thread(loop.settle, stable)
            verdicts.append(f"v{offered} {'rolled back' if rolled_back else 'promoted'}")
            console.print(f"canary: {verdicts[-1]}" + (f"; training goes on from v{stable}" if rolled_back else ""))
            offered, waiting = None, False
        if trainer.step_count >= config.run.steps:
            return verdicts
        t0 = time.perf_counter()
        step = await asyncio.to_thread(loop.train_once, config.run_dir)
        if step is None:
            await asyncio.sleep(pt.poll_s)
            continue
        m = step.metrics
        if direct or not await sink.offer(step.version):
            if not direct:
                console.print("[yellow]the gateway has no canary API: each version is served to every session "
                              "as soon as it is trained[/]")
            direct = True
            await sink.publish_directly(trainer, step.version)
        else:
            offered = step.version
        console.print(f"update {trainer.step_count}/{config.run.steps}: v{step.version} on {len(step.sessions)} "
                      f"sessions (stale dropped {step.stale}, task groups {m.get('count/groups.trained', 0)}) | "
                      f"outcome {m.get('reward/mean', float('nan')):.3f} baseline "
                      f"{m.get('count/baseline.mean', float('nan')):.3f} | advantage std "
                      f"{m.get('advantage/std', float('nan')):.3f} | is_weight {m.get('is_weight_mean', 0):.3f} "
                      f"kl(behaviour) {m.get('approx_kl', 0):.4f} grad_norm {m.get('grad_norm', 0):.3f} lr "
                      f"{m.get('lr', 0):.1e} | {'published' if direct else 'canary candidate'} | "
                      f"{time.perf_counter() - t0:.0f}s")
