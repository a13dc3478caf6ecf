"""Reward: a deterministic function of the answer, so groups have variance without a capable model."""

import zlib
from pathlib import Path

answer = Path("answer.txt").read_text() if Path("answer.txt").exists() else ""
print((zlib.crc32(answer.encode()) % 7) / 6)
