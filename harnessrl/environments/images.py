"""Task images: a named image checked once, a Dockerfile folder built once per content hash.

A built image is tagged ``harnessrl/<task>:<hash>`` where the hash covers every file of the build folder
(names, bytes, executable bits) and the Dockerfile's name, so an edited task is built again and an unchanged
one is reused across attempts and runs (the engine's own image store is the cache). One build per tag at a
time in this process; a failed build is remembered for the run, so its task's attempts fail at once as infra
with the build log's tail instead of rebuilding each time. With ``harness = "install"`` the install command
runs once per image and its result is committed as ``harnessrl/<task>-harness:<hash>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from pathlib import Path

from harnessrl.environments.config import ContainerConfig
from harnessrl.environments.engine import Engine
from harnessrl.environments.task_env import TaskEnvironment

logger = logging.getLogger(__name__)

_TAIL = 4000


class ImageError(RuntimeError):
    """A task's image could not be had (build failed, not on this machine); the message says which and why."""


def context_digest(folder: Path, dockerfile: str = "Dockerfile") -> str:
    """16 hex digits over the build folder's files (path, content, executable bit) and the Dockerfile name."""
    sha = hashlib.sha256(dockerfile.encode() + b"\0")
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            sha.update(path.relative_to(folder).as_posix().encode() + b"\0")
            sha.update(hashlib.sha256(path.read_bytes()).digest())
            sha.update(b"x" if os.access(path, os.X_OK) else b"-")
    return sha.hexdigest()[:16]


def repo_name(name: str) -> str:
    """A task name as an image repository component (lowercase, [a-z0-9._-], at most 100 characters)."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip(".-_") or "task"
    return cleaned[:100]


class ImageResolver:
    """Gives each task its image, building and deriving as needed; shared by a runner's attempts."""

    def __init__(self, engine: Engine, config: ContainerConfig) -> None:
        self.engine, self.config = engine, config
        self._locks: dict[str, asyncio.Lock] = {}
        self._ready: set[str] = set()
        self._failed: dict[str, str] = {}

    async def image_for(self, env: TaskEnvironment | None) -> str:
        """The image an attempt of this task runs in (the harness installed where configured)."""
        base = await self._task_image(env)
        if self.config.harness != "install":
            return base
        return await self._derived(base, env.name if env is not None else "default")

    async def task_image(self, env: TaskEnvironment | None) -> str:
        """The task's own image, without the harness (clean grading starts from it)."""
        return await self._task_image(env)

    async def _task_image(self, env: TaskEnvironment | None) -> str:
        if env is None:
            if self.config.default_image is None:
                raise ImageError("the task names no image (no Dockerfile, docker_image or JSONL 'image') and "
                                 "[runner.container] default_image is not set")
            return await self._named(self.config.default_image)
        if env.image is not None:
            return await self._named(env.image)
        assert env.build_context is not None
        if not (env.build_context / env.dockerfile).is_file():
            raise ImageError(f"task {env.name}: no {env.dockerfile} in {env.build_context}")
        digest = await asyncio.to_thread(context_digest, env.build_context, env.dockerfile)
        tag = f"harnessrl/{repo_name(env.name)}:{digest}"
        return await self._once(tag, lambda: self._build(env, tag))

    async def _named(self, image: str) -> str:
        async def check() -> None:
            if (await self.engine.run("image", "exists", image, check=False, timeout_s=60)).returncode == 0:
                return
            if self.config.pull == "never":
                raise ImageError(f"image {image!r} is not on this machine ({self.engine.name} image exists: no); "
                                 f"build or pull it first, or set [runner.container] pull = \"missing\"")
            done = await self.engine.run("pull", image, check=False, timeout_s=self.config.build_timeout_s)
            if done.returncode != 0:
                raise ImageError(f"could not pull {image!r}: {done.stderr.strip()[-_TAIL:]}")
        return await self._once(image, check)

    async def _once(self, key: str, make: object) -> str:
        """Run ``make`` for ``key`` once (at a time, and once it succeeded); a failure is remembered."""
        if key in self._ready:
            return key
        if key in self._failed:
            raise ImageError(self._failed[key])
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._ready:
                return key
            if key in self._failed:
                raise ImageError(self._failed[key])
            try:
                await make()  # type: ignore[operator]
            except ImageError as exc:
                self._failed[key] = str(exc)
                raise
            self._ready.add(key)
        return key

    async def _build(self, env: TaskEnvironment, tag: str) -> None:
        if (await self.engine.run("image", "exists", tag, check=False, timeout_s=60)).returncode == 0:
            return  # built by an earlier run: the content hash says it is the same
        pull = ["--pull=never"] if self.engine.name == "podman" and self.config.pull == "never" else []
        limit = env.build_timeout_s or self.config.build_timeout_s
        logger.info("building the image of task %s (%s)", env.name, tag)
        assert env.build_context is not None
        done = await self.engine.run(
            "build", *pull, "--label", "harnessrl.task=" + env.name, "-f", str(env.build_context / env.dockerfile),
            "-t", tag, str(env.build_context), check=False, timeout_s=limit, limit_bytes=256 << 10)
        if done.returncode != 0:
            why = f"timed out after {limit:g}s" if done.returncode is None else f"exit {done.returncode}"
            log = (done.text + "\n" + done.stderr).strip()[-_TAIL:]
            raise ImageError(f"task {env.name}: image build failed ({why}); build log ends:\n{log}")

    async def _derived(self, base: str, name: str) -> str:
        install = self.config.install
        if not install:
            raise ImageError('[runner.container] harness = "install" needs an install command (install = [...])')
        inspected = await self.engine.run("image", "inspect", "--format", "{{.Id}}", base, timeout_s=60)
        sha = hashlib.sha256(inspected.text.strip().encode() + b"\0" + "\0".join(install).encode()).hexdigest()[:16]
        tag = f"harnessrl/{repo_name(name)}-harness:{sha}"

        async def make() -> None:
            if (await self.engine.run("image", "exists", tag, check=False, timeout_s=60)).returncode == 0:
                return
            box = f"hrl-install-{sha}"
            argv = ["sh", "-c", install[0]] if len(install) == 1 else list(install)
            await self.engine.remove(box, timeout_s=60)
            try:
                done = await self.engine.run("run", "--name", box, "--entrypoint", argv[0], base, *argv[1:],
                                             check=False, timeout_s=self.config.build_timeout_s)
                if done.returncode != 0:
                    raise ImageError(f"installing the harness into {base} failed (exit {done.returncode}):\n"
                                     f"{(done.text + done.stderr)[-_TAIL:]}")
                await self.engine.run("commit", box, tag, timeout_s=600)
            finally:
                await self.engine.remove(box, timeout_s=60)
        return await self._once(tag, make)
