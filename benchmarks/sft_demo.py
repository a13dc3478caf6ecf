"""SFT on the CPU demo's recorded reward-1.0 rollouts: does it lift the base model's held-out reward?

The base SmolLM2-135M almost never answers with the bare name (reward 1.0), so its own rollouts hold
none to imitate. The rollouts come from a *teacher* behind an engine URL, as in production: a scripted
engine sharing SmolLM2's tokenizer that reads the search result in its prompt and answers with exactly
the name. The unmodified demo agent runs against it through the real gateway (token-exact render mode:
the gateway applies SmolLM2's template and records the token IDs), the demo's verifier scores it, and
``harnessrl sft`` then trains SmolLM2 (LoRA, the demo's settings) on the rollouts with reward >= 1.0 and
evaluates on held-out tasks it never saw, greedy, before and after. One run prints everything:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/sft_demo.py --train-tasks 48 --eval-tasks 20 --steps 12
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo"
sys.path.insert(0, str(ROOT / "tests"))

from fakes.fake_engine import EngineServer, FakeEngine  # noqa: E402

FACT = re.compile(r"Search results:\n.*? is (?:the )?([A-Z][A-Za-z]+)\.", re.S)


class TeacherEngine(FakeEngine):
    """Answers in SmolLM2's tokens: 'Let me search.' first, then exactly the name the search found."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__(model="teacher")
        self.tok = tokenizer
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def generate(self, prompt: list[int], body: dict, index: int) -> tuple[list[int], str, dict | None]:
        text = self.tok.decode(prompt)
        last_user = text.rsplit("<|im_start|>user", 1)[-1]
        found = FACT.search(last_user)
        answer = found.group(1) if found else "Let me search."
        return [*self.tok.encode(answer, add_special_tokens=False), self.end], "stop", None


def config_text(run_dir: Path, *, engine: str, store: Path, eval_tasks: int, extra: str = "") -> str:
    base = (DEMO / "config.toml").read_text()
    base = base.replace('dir = "../../runs/demo"', f'dir = "{run_dir}"')
    base = base.replace("eval_tasks = 40", f"eval_tasks = {eval_tasks}")
    base = base.replace('train = "train.jsonl"', f'train = "{DEMO / "train.jsonl"}"')
    base = base.replace('eval = "eval.jsonl"', f'eval = "{DEMO / "eval.jsonl"}"')
    base = base.replace('command = ["python", "agent.py"]', f'command = ["{sys.executable}", "{DEMO / "agent.py"}"]')
    base = base.replace('verifier = ["python", "verify.py"]', f'verifier = ["{sys.executable}", "{DEMO / "verify.py"}"]')
    base += f'\n[store]\nurl = "sqlite:///{store}"\n'
    if engine != "embedded":
        base = base.replace('kind = "embedded"', f'kind = "openai"\nurls = ["{engine}"]')
        base += '\n[gateway.render]\ntokenizer = "smollm2"\n'
    return base + extra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train-tasks", type=int, default=48, help="train tasks the teacher answers (of 120)")
    ap.add_argument("--eval-tasks", type=int, default=20, help="held-out tasks per evaluation (of 40)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rollouts-per-step", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dir", help="work folder (default: a temporary one)")
    args = ap.parse_args()

    from harnessrl.config import load_config
    from harnessrl.drivers.rl import collect
    from harnessrl.drivers.sft import run_sft
    from harnessrl.models import load_tokenizer
    from harnessrl.types import TaskSplit

    work = Path(args.dir or tempfile.mkdtemp(prefix="sft-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store.db"
    t0 = time.perf_counter()
    server = EngineServer(TeacherEngine(load_tokenizer("smollm2"))).start()
    try:
        cfg = work / "teacher.toml"
        cfg.write_text(config_text(work / "teacher", engine=server.url, store=store, eval_tasks=args.train_tasks))
        teacher = asyncio.run(collect(load_config(cfg), None, TaskSplit.TRAIN))
    finally:
        server.stop()
    t1 = time.perf_counter()
    print(f"teacher on {teacher.tasks} train tasks: reward {teacher.mean_reward:.2f} ({t1 - t0:.0f}s)", flush=True)
    from harnessrl.store import open_store

    s = open_store(f"sqlite:///{store}")
    runs = [r.id for r in s.list_runs() if r.id.startswith("collect-")]
    s.close()
    sft_cfg = work / "sft.toml"
    sft_cfg.write_text(config_text(
        work / "sft", engine="embedded", store=work / "sft-store.db", eval_tasks=args.eval_tasks,
        extra=f'\n[sft]\nstore = "sqlite:///{store}"\nruns = {json.dumps(runs)}\nsplit = "any"\nmin_reward = 1.0\n'
              f"steps = {args.steps}\nrollouts_per_step = {args.rollouts_per_step}\n",
    ).replace("lr = 1e-3", f"lr = {args.lr}"))
    summary = run_sft(load_config(sft_cfg))
    t2 = time.perf_counter()
    print(f"sft: {summary.held_out_line()} | {args.steps} steps x {args.rollouts_per_step} rollouts, lr {args.lr} "
          f"| {t2 - t1:.0f}s (total {t2 - t0:.0f}s) | work dir {work}", flush=True)


if __name__ == "__main__":
    main()
