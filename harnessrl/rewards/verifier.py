"""The verifier: a command run after the harness exits, in the same working directory, printing a reward.

When the harness ran sandboxed (``AttemptResult.sandbox``), so does the verifier: the workspace (now with
the hidden files) read-write, its input files read-only, and no network at all. Every process of the
harness is gone by then (the sandbox's PID namespace died with it), so none can watch the hidden files
arrive.

Contract for verifier authors: exit 0 and print the reward as a number on the last line of stdout.
Anything else (non-zero exit, timeout, no number, NaN) is a ``VerifierError``: by default the rollout
becomes an infra failure, because a broken verifier says nothing about the agent.

What it gets (never any API key): cwd = the workspace, with the task's hidden files copied in;
``HARNESSRL_TASK_INPUT``/``_FILE`` and ``HARNESSRL_TASK_<KEY>`` (the task input),
``HARNESSRL_VERIFIER_INPUT``/``_FILE`` (the task's verifier-only data, e.g. a reference answer),
``HARNESSRL_STDOUT_FILE``/``HARNESSRL_STDERR_FILE`` (the harness's output tails),
``HARNESSRL_EXIT_CODE`` (empty if none), ``HARNESSRL_TIMED_OUT`` (``0``/``1``), ``HARNESSRL_ROLLOUT_ID``,
``HARNESSRL_TASK_ID``, ``HARNESSRL_HIDDEN_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessrl.rewards.config import RewardConfig
from harnessrl.runners.env import base_env, task_input_env
from harnessrl.runners.process import ProcessStartError, describe_exit, run_process
from harnessrl.runners.sandbox import Sandbox, sandbox_env
from harnessrl.runners.spec import AttemptResult, AttemptSpec
from harnessrl.runners.workspace import WorkspaceError, copy_into

_ENV_JSON_LIMIT = 1 << 17  # the kernel refuses single variables over 128 KiB


class VerifierError(Exception):
    """The verifier could not produce a reward (crash, timeout, unparsable output, missing files)."""


@dataclass(frozen=True, slots=True)
class VerifierRun:
    value: float
    output: str  # stdout and stderr tails, for the rollout's record


def parse_reward(stdout: str) -> float:
    """The float on the last non-empty line of ``stdout``; ``VerifierError`` with a fix otherwise."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise VerifierError("verifier printed nothing on stdout; print the reward last, e.g. print(0.75)")
    try:
        value = float(lines[-1])
    except ValueError:
        raise VerifierError(
            f"verifier's last stdout line is not a number: {lines[-1][:200]!r}; print the reward last"
        ) from None
    if not math.isfinite(value):
        raise VerifierError(f"verifier printed {value}; a reward must be a finite number")
    return value


def _prepare_files(spec: AttemptSpec, result: AttemptResult, hidden_dest: Path) -> dict[str, str]:
    """Place hidden files, write the verifier's inputs; returns their environment variables."""
    assert result.attempt_dir is not None
    vdir = result.attempt_dir / "verifier"
    vdir.mkdir(exist_ok=True)
    if spec.assets.hidden_dir is not None:
        copy_into(spec.assets.hidden_dir, hidden_dest)
    files = {
        "HARNESSRL_TASK_INPUT_FILE": (
            "task_input.json",
            json.dumps(dict(spec.task_input), ensure_ascii=False),
        ),
        "HARNESSRL_VERIFIER_INPUT_FILE": (
            "verifier_input.json",
            json.dumps(dict(spec.assets.verifier_input or {}), ensure_ascii=False),
        ),
        "HARNESSRL_STDOUT_FILE": ("harness_stdout.txt", result.stdout),
        "HARNESSRL_STDERR_FILE": ("harness_stderr.txt", result.stderr),
    }
    env = {}
    for var, (name, text) in files.items():  # fresh copies: the harness may have edited its own
        (vdir / name).write_text(text, errors="replace")
        env[var] = str(vdir / name)
    return env


async def run_verifier(
    command: Sequence[str], spec: AttemptSpec, result: AttemptResult, config: RewardConfig
) -> VerifierRun:
    """Copy hidden files in, run the verifier in the workspace, parse its reward."""
    if result.workdir is None or result.attempt_dir is None:
        raise VerifierError("the attempt has no working directory to verify")
    hidden_dest = (result.workdir / config.hidden_subdir).resolve()
    try:
        file_env = await asyncio.to_thread(_prepare_files, spec, result, hidden_dest)
    except (OSError, WorkspaceError) as exc:
        raise VerifierError(f"could not prepare verifier inputs: {exc}") from exc
    env = base_env(config.verifier_inherit_env)
    env.update(config.verifier_env)
    env.update(task_input_env(spec.task_input, _ENV_JSON_LIMIT))
    verifier_json = json.dumps(dict(spec.assets.verifier_input or {}), ensure_ascii=False)
    if len(verifier_json.encode()) <= _ENV_JSON_LIMIT:
        env["HARNESSRL_VERIFIER_INPUT"] = verifier_json
    env.update(file_env)
    env.update(
        HARNESSRL_ROLLOUT_ID=spec.rollout_id,
        HARNESSRL_TASK_ID=spec.task_id,
        HARNESSRL_EXIT_CODE="" if result.exit_code is None else str(result.exit_code),
        HARNESSRL_TIMED_OUT="1" if result.timed_out else "0",
        HARNESSRL_HIDDEN_DIR=str(hidden_dest),
    )
    argv: Sequence[str] = command
    if result.sandbox is not None:  # the same sandbox as the harness, without the gateway: no network
        env = sandbox_env(env)
        argv = result.sandbox.argv(command, workdir=result.workdir, read_only=[Path(file_env[
            "HARNESSRL_TASK_INPUT_FILE"]).parent], home=env.get("HOME"))
    try:
        out = await run_process(
            argv,
            cwd=result.workdir,
            env=env,
            timeout_s=config.verifier_timeout_s,
            kill_grace_s=config.verifier_kill_grace_s,
            max_output_bytes=config.verifier_max_log_bytes,
        )
    except ProcessStartError as exc:
        raise VerifierError(str(exc)) from exc
    output = f"--- verifier stdout ---\n{out.stdout}\n--- verifier stderr ---\n{out.stderr}\n"
    if out.timed_out:
        raise VerifierError(f"verifier ran past its timeout of {config.verifier_timeout_s:g}s")
    exit_code = out.exit_code if result.sandbox is None else Sandbox.exit_code(out.exit_code)
    if exit_code != 0:
        tail = out.stderr.strip()[-500:]
        raise VerifierError(
            f"verifier {describe_exit(exit_code)}" + (f"; stderr ends: {tail}" if tail else "")
        )
    return VerifierRun(value=parse_reward(out.stdout), output=output)
