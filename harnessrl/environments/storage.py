"""The disk an attempt's container writes, watched: ``storage_mb`` where the engine cannot enforce it.

Podman and Docker cap a container's writable layer (``--storage-opt size``) only on some storage drivers
(overlay on XFS with project quotas); on ext4, what these machines and most laptops have, a disk-filling
agent would fill the host's disk. So the runner measures the container's writable layer (its overlay
``UpperDir``) every ``INTERVAL_S`` and stops the attempt once it passes the limit: the attempt fails as the
agent's doing, the container goes with its files, and the host and the other attempts keep their disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

INTERVAL_S = 1.0


def size_over(root: Path, limit_bytes: int) -> int | None:
    """The bytes under ``root`` once they pass ``limit_bytes`` (the walk stops there), else None."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
                if total > limit_bytes:
                    return total
    return None


async def watch(upper: Path, limit_mb: int, on_over: Callable[[int], None]) -> None:
    """Call ``on_over(bytes)`` once the writable layer at ``upper`` passes ``limit_mb``; runs until cancelled."""
    limit = limit_mb << 20
    while True:
        over = await asyncio.to_thread(size_over, upper, limit)
        if over is not None:
            on_over(over)
            return
        await asyncio.sleep(INTERVAL_S)
