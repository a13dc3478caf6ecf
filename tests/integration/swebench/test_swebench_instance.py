"""A SWE-bench-format instance end to end in a real container: examples/swebench (statskit, a median bug)
built with Podman or Docker, loaded by ``load_swebench_tasks``, a patch applied at /testbed as an agent
would leave it, graded by the runner's ``grade_attempt`` (same container, and a clean one) through
swebench's own rule. The gold patch resolves it (1), the bad one fixes the issue but breaks a passing test
(0), no change (0), and a hang in the agent's code runs past the tests' limit (0).

No __init__.py in this folder: a package named ``swebench`` on pytest's path would shadow the library.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessrl.environments.container import Container, ContainerSpec
from harnessrl.environments.engine import Engine, EngineUnavailable, find_engine
from harnessrl.environments.grade import Grade
from harnessrl.rewards.container_grading import grade_attempt
from harnessrl.swebench.load import SwebenchTask, load_swebench_tasks

pytestmark = pytest.mark.container

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "swebench"


@pytest.fixture(scope="module")
def engine() -> Engine:
    try:
        return find_engine()
    except EngineUnavailable as exc:
        pytest.skip(f"no container engine: {exc}")


@pytest.fixture(scope="module")
def task(engine: Engine) -> Iterator[SwebenchTask]:
    (task,) = load_swebench_tasks(EXAMPLE / "instances.jsonl")
    image = task.environment.image
    assert image is not None
    asyncio.run(engine.run("build", "--pull=never", "-q", "-t", image, str(EXAMPLE), timeout_s=300))
    yield task


def attempt(engine: Engine, task: SwebenchTask, patch: str | None, *, then: str | None = None,
            clean: bool = False, timeout_s: float = 120) -> Grade:
    """A container of the instance image with ``patch`` applied at /testbed (and the shell command ``then``
    run there), graded as the runner grades."""
    env = task.environment
    assert env.image is not None and env.workdir is not None

    async def go() -> Grade:
        spec = ContainerSpec(image=env.image, name=f"hrl-swebench-test-{uuid.uuid4().hex[:8]}",
                             labels={"harnessrl.test": "swebench"}, workdir=env.workdir)
        box = await Container.start(engine, spec)
        try:
            head = await box.exec(["git", "rev-parse", "HEAD"], timeout_s=30)
            assert head.output.strip() == env.grader_input["base_commit"]  # the image holds the record's commit
            if patch is not None:
                await box.put(EXAMPLE / patch, "/tmp/agent.patch")
                applied = await box.exec(["git", "apply", "/tmp/agent.patch"], timeout_s=30)
                assert applied.exit_code == 0, applied.output
            if then is not None:
                assert (await box.exec(["bash", "-c", then], timeout_s=30)).exit_code == 0
            box.clean = clean
            return await grade_attempt(box, env, timeout_s=timeout_s)
        finally:
            await box.remove()

    return asyncio.run(go())


def test_gold_patch_resolves(engine, task):
    grade = attempt(engine, task, "gold.patch")
    assert (grade.value, grade.error) == (1.0, None), grade.output
    assert "resolved=True" in grade.output
    assert "test_median_even (tests.test_stats.StatsTest.test_median_even) ... ok" in grade.output


def test_gold_patch_resolves_in_a_clean_container(engine, task):
    grade = attempt(engine, task, "gold.patch", clean=True)
    assert (grade.value, grade.error) == (1.0, None), grade.output


def test_bad_patch_breaks_a_passing_test(engine, task):
    grade = attempt(engine, task, "bad.patch")
    assert (grade.value, grade.error) == (0.0, None), grade.output
    assert 'PASS_TO_PASS: 1 passed, failed: ["test_median_odd (tests.test_stats.StatsTest.test_median_odd)"]' \
        in grade.output


def test_no_change_is_not_resolved(engine, task):
    grade = attempt(engine, task, None)
    assert (grade.value, grade.error) == (0.0, None), grade.output


def test_a_hang_runs_past_the_limit(engine, task):
    hang = r"sed -i 's/^    ordered = sorted(values)$/&\n    while True: pass/' statskit/__init__.py"
    grade = attempt(engine, task, "gold.patch", then=hang, timeout_s=5)
    assert (grade.value, grade.error) == (0.0, None), grade.output
    assert "timed out after 5 s" in grade.output
