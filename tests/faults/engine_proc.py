"""The fake engine as its own process, so that a test can SIGKILL it mid-stream (a real crash).

``python tests/faults/engine_proc.py --port P --token-delay 0.05``: like ``fake_engine.py`` plus the slow modes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ -> `fakes` importable

from fakes.fake_engine import FakeEngine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--completion-len", type=int, default=16)
    ap.add_argument("--token-delay", type=float, default=0.0)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    import uvicorn

    engine = FakeEngine(completion_len=args.completion_len)
    engine.token_delay_s, engine.delay_s = args.token_delay, args.delay
    uvicorn.run(engine, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, backlog=4096)


if __name__ == "__main__":
    main()
