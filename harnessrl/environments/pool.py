"""A warm pool: containers created and started ahead of time, so an attempt only ``exec``-s its harness.

Why (docs/containers-choices.md, "Cold start and warm pools", has the figures): create+start+mkdir is most
of a container attempt's start, and the engine serializes it on a lock, so a group of attempts starting at
once waits in line. A pool moves that work off the attempt's path; it does not remove it (the same CPUs and
lock pay the refill), so it pays where the host has idle time while attempts wait on the model.

A pooled container is used by one attempt and removed with it: never reused. Containers are pooled per
``key`` (image, workdir, limits, network, mounts): only an attempt whose container would be made the same
way takes one. Files an attempt brings (its gateway socket, its task input) cannot be mounted into a
running container, so a pooled one mounts a fresh host folder at ``late_dir`` and ``take`` places them
there: a hard link for the socket (both folders are under the temp dir), a copy for a file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Coroutine, Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harnessrl.environments.container import Container, ContainerSpec
from harnessrl.environments.engine import LABEL_ROLLOUT, Engine, EngineError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Pooled:
    box: Container
    folder: Path


class WarmPool:
    """Up to ``size`` started containers in all, of the key an attempt last took (older keys' are evicted)."""

    def __init__(self, engine: Engine, size: int, late_dir: str) -> None:
        self.engine, self.size, self.late_dir = engine, size, late_dir.rstrip("/")
        self._ready: dict[Hashable, list[_Pooled]] = {}
        self._filling: dict[Hashable, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._folders: list[Path] = []
        self.hits = self.misses = 0

    def _late(self, inside: str) -> bool:
        return inside == self.late_dir or inside.startswith(self.late_dir + "/")

    def key(self, spec: ContainerSpec) -> Hashable:
        """What makes two attempts' containers the same, but for their name, labels and late files."""
        return (spec.image, spec.workdir, spec.network, spec.cpus, spec.memory_mb, spec.pids_limit, spec.user,
                tuple(spec.extra_args), tuple(m for m in spec.mounts if not self._late(m[1])))

    async def take(self, spec: ContainerSpec) -> Container:
        """A started container for ``spec``: a pooled one with the late files placed, else a cold start.
        Either way the pool of ``spec``'s key is refilled in the background. ``EngineError`` as ``start``."""
        key = self.key(spec)
        ready = self._ready.get(key, [])
        pooled = ready.pop(0) if ready else None
        self._refill(key, spec)
        if pooled is not None:
            try:
                await asyncio.to_thread(self._place, spec, pooled.folder)
            except OSError as exc:
                logger.warning("warm pool: could not place the attempt's files (%s); starting cold", exc)
                await pooled.box.remove()
                pooled = None
        if pooled is None:
            self.misses += 1
            return await Container.start(self.engine, spec)
        self.hits += 1
        pooled.box.spec = spec  # clean grading copies the attempt's labels and limits from it
        return pooled.box

    def _place(self, spec: ContainerSpec, folder: Path) -> None:
        for host, inside, _ro in spec.mounts:
            if not self._late(inside):
                continue
            dest = folder / os.path.relpath(inside, self.late_dir)
            src = Path(host)
            if src.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                for entry in src.iterdir():
                    os.link(entry, dest / entry.name)  # a unix socket: copying would not connect
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)

    def _refill(self, key: Hashable, spec: ContainerSpec) -> None:
        held = sum(len(v) for v in self._ready.values()) + sum(self._filling.values())
        for other in [k for k in self._ready if k != key]:  # another image's: its attempts have moved on
            while self._ready[other] and held >= self.size:
                self._spawn(self._ready[other].pop(0).box.remove())
                held -= 1
        for _ in range(max(0, self.size - held)):
            self._filling[key] = self._filling.get(key, 0) + 1
            self._spawn(self._fill_one(key, spec))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fill_one(self, key: Hashable, spec: ContainerSpec) -> None:
        folder = Path(tempfile.mkdtemp(prefix="hrl-pool-"))
        self._folders.append(folder)
        pooled_spec = replace(spec, name=f"hrl-pool-{uuid.uuid4().hex[:12]}",
                              labels={**spec.labels, LABEL_ROLLOUT: "pool"},
                              mounts=[*(m for m in spec.mounts if not self._late(m[1])),
                                      (str(folder), self.late_dir, False)])
        try:
            box = await Container.start(self.engine, pooled_spec)
        except (EngineError, OSError) as exc:
            logger.warning("warm pool: could not start a container of %s: %s", spec.image, exc)
            return
        finally:
            self._filling[key] -= 1
        self._ready.setdefault(key, []).append(_Pooled(box, folder))

    async def aclose(self) -> None:
        """Remove every pooled container not taken and every folder the pool made. Fills and removals in
        flight are awaited, not cancelled: a start cut short could leave a container only the sweep finds."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=120.0)
        left = [p for v in self._ready.values() for p in v]
        self._ready.clear()
        await asyncio.gather(*(p.box.remove() for p in left))
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)
        self._folders.clear()
