"""A controller process for the Kubernetes re-attach fault: ``python k8s_controller.py CONFIG`` runs step 1's
attempts (as Jobs on the emulated API in the config) and prints the rollouts it trained on as JSON.
The test SIGKILLs it mid-step (the controller host restarts) and starts it again."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faultkit import collect_one_step  # noqa: E402

if __name__ == "__main__":
    good, everything = asyncio.run(collect_one_step(Path(sys.argv[1])))
    print(orjson.dumps({"good": [r.id for r in good],
                        "all": {r.id: [r.status.value, r.failure_kind and r.failure_kind.value, r.error]
                                for r in everything}}).decode())
