"""Grading an attempt in its container, the way benchmarks grade (docs/containers.md, "Grading").

``same`` (Harbor's semantics, the default): the tests are copied into the attempt's own container once the
harness has exited (and every process it left is killed) and run there. ``clean``: only the workdir, as the
attempt left it, is copied into a fresh container of the task's image and the tests run there, so a
``python3`` replaced elsewhere, an edited tool or a process left behind cannot reach them.

The task's grader reads the outcome: ``harbor`` the reward file (``harbor.verify.read_reward``'s rules),
``swebench`` the official package's resolution rule (``harnessrl.swebench.grade``).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path
from typing import Any

from harnessrl.environments.grade import Box, Grade
from harnessrl.environments.reward_file import RewardFileError, read_reward
from harnessrl.environments.task_env import ContainerTests, TaskEnvironment

logger = logging.getLogger(__name__)
_TAIL = 6000


async def run_harbor_tests(box: Box, tests: ContainerTests, *, workdir: str, python: str,
                           outer_timeout_s: float) -> Grade:
    """Copy the tests in, run them, read the reward file (Harbor's rules: a timeout scores 0)."""
    reward_dir = tests.reward_dir.rstrip("/")
    logs = str(Path(reward_dir).parent)
    # As Harbor does: the folders made, and a reward file the agent left there removed before the tests run.
    made = await box.exec([python, "-I", "-S", "-c", "import os,sys\nfor d in sys.argv[1:]: os.makedirs(d, "
                           "exist_ok=True)\nfor n in ('reward.txt', 'reward.json'):\n p = os.path.join(sys.argv[1], n)"
                           "\n if os.path.lexists(p): os.unlink(p)", reward_dir, f"{logs}/agent", f"{logs}/artifacts",
                           tests.tests_path], timeout_s=60)
    if made.exit_code != 0:
        return Grade(None, made.output, f"could not make the tests' folders in the container: {made.output[-500:]}")
    await box.put(tests.tests_dir, tests.tests_path)
    limit = min(tests.timeout_s, outer_timeout_s)
    ran = await box.exec(list(tests.command), timeout_s=limit, workdir=workdir, env=dict(tests.env) or None)
    output = f"--- {' '.join(tests.command)} (exit {ran.exit_code}) ---\n{ran.output[-_TAIL:]}"
    if ran.timed_out:
        if limit < tests.timeout_s:
            return Grade(None, output, f"tests ran past [rewards] verifier_timeout_s = {outer_timeout_s:g}s before "
                                       f"the task's own timeout of {tests.timeout_s:g}s; raise verifier_timeout_s")
        return Grade(0.0, output + f"\ntests ran past the task's timeout of {tests.timeout_s:g}s: reward 0")
    with tempfile.TemporaryDirectory(prefix="hrl-reward-") as tmp:
        for name in ("reward.txt", "reward.json"):
            data = await box.read(f"{reward_dir}/{name}")
            if data is not None:
                (Path(tmp) / name).write_bytes(data)
        try:
            value, numbers = read_reward(Path(tmp))
        except RewardFileError as exc:
            return Grade(None, output, str(exc))
    if len(numbers) > 1:
        output += f"\nreward.json: {numbers}"
    return Grade(value, output)


async def grade_in(box: Box, env: TaskEnvironment, *, workdir: str, python: str, timeout_s: float) -> Grade:
    """Grade in ``box`` by the task's grader."""
    if env.grader == "swebench":
        from harnessrl.swebench.grade import grade_swebench

        return await grade_swebench(box, env, timeout_s=timeout_s)
    if env.tests is None:
        return Grade(None, "", f"task {env.name} has no tests to run in its container")
    return await run_harbor_tests(box, env.tests, workdir=workdir, python=python, outer_timeout_s=timeout_s)


async def grade_attempt(box: object, env: TaskEnvironment, *, timeout_s: float) -> Grade:
    """Grade an attempt whose container is ``box`` (a ``container.Container``), same or clean per its flag.

    Never raises for the engine's failures: they are a ``Grade`` without a value (infra)."""
    from harnessrl.environments.container import Container
    from harnessrl.environments.engine import EngineError

    assert isinstance(box, Container)
    try:
        await box.stop_processes()  # the harness is gone; so is everything it left running
        if not box.clean:
            return await grade_in(box, env, workdir=box.workdir, python=box.python, timeout_s=timeout_s)
        tar = await box.export_workdir()
        try:
            try:
                return await _grade_clean(box, env, tar, "grade", timeout_s=timeout_s)
            except EngineError as exc:  # a fresh container is cheap to make again: one engine hiccup is not infra
                logger.info("grading %s in a clean container: %s; once more in another", box.name, exc)
                await asyncio.sleep(1.0)
                return await _grade_clean(box, env, tar, "grade2", timeout_s=timeout_s)
        finally:
            await asyncio.to_thread(tar.unlink, True)
    except (EngineError, OSError) as exc:
        logger.warning("grading in the container of %s failed: %s", box.name, exc)
        return Grade(None, "", f"grading in the container failed: {exc}")


async def _grade_clean(box: Any, env: TaskEnvironment, tar: Path, suffix: str, *, timeout_s: float) -> Grade:
    """The tests in a fresh container of the task's image holding only the attempt's workdir (``tar``)."""
    from harnessrl.environments.container import Container, ContainerSpec

    assert box.spec is not None
    spec = ContainerSpec(image=box.grade_image or box.image, name=f"{box.name}-{suffix}", labels=box.spec.labels,
                         workdir=box.workdir, network="none", cpus=box.spec.cpus, memory_mb=box.spec.memory_mb,
                         pids_limit=box.spec.pids_limit)
    fresh = await Container.start(box.engine, spec)
    try:
        await fresh.import_workdir(tar)
        return await grade_in(fresh, env, workdir=fresh.workdir, python=fresh.python, timeout_s=timeout_s)
    finally:
        await fresh.remove()
