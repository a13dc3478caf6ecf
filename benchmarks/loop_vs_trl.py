"""The architecture tax: harnessrl (the agent a subprocess, every call through the gateway) against TRL's
GRPOTrainer (generation inside the trainer) on one small task, the same model, settings and seed.

The task: the demo's fictional atlas, in one call. The prompt holds the fact the demo agent's search would
find and the question ("What is the capital of Quivenzan? Reply with only the name."); the reward is the
demo verifier's rule (1 for exactly the name, 0.25 for the name in a short answer, else 0). Both sides:
SmolLM2-135M-Instruct, LoRA r16/alpha 32 on the same modules, lr 1e-3, 6 prompts x 4 samples per step at
temperature 1.0, at most 16 new tokens, group-normalized advantages, per-sequence loss (TRL
``loss_type="grpo"``, harnessrl ``normalization = "rollout"``: the same for one call per rollout), no KL,
fp32 on CPU (harnessrl's ``dtype = "auto"`` would train in bf16 autocast where the CPU multiplies bf16
natively, TRL ``bf16=False``: pinned so both sides compute alike), no gradient checkpointing, one update per step.

Printed per side: seconds from start (model load included) to the first step whose mean training reward
reaches ``--threshold``, seconds per step, and the ratio harnessrl / TRL (the issue's target: <= 1.0).
The two runs take turns in one process run (harnessrl first, then TRL, or ``--trl-first``), so they see
the same machine; on a loaded machine repeat it and compare ratios, not seconds.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/loop_vs_trl.py --steps 12 --threshold 0.5

Needs TRL: ``.venv/bin/pip install 'harnessrl[bench]'`` (trl 1.16).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo"
SYSTEM = "You answer questions about countries."
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

AGENT = '''"""One call: the prompt the benchmark wrote for this task, the answer to answer.txt."""
import os
from pathlib import Path
from openai import OpenAI

reply = OpenAI().chat.completions.create(
    model="policy", max_tokens=16,
    messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": os.environ["HARNESSRL_TASK_PROMPT"]}],
)
Path("answer.txt").write_text(reply.choices[0].message.content or "")
'''.replace("SYSTEM", repr(SYSTEM))

STEP = re.compile(r"^step (\d+)/\d+: reward ([0-9.]+)")
TIMING = re.compile(r"\b(rollouts|train|publish) (\d+)s\b")  # the step line's timings


@dataclass
class Curve:
    """Mean training reward per step and the seconds since the run started when each step ended."""

    name: str
    rewards: list[float] = field(default_factory=list)
    at_s: list[float] = field(default_factory=list)
    #: harnessrl's step line timings (rollouts, train, publish; whole seconds), summed over the steps
    parts: dict[str, float] = field(default_factory=dict)

    def time_to(self, threshold: float) -> float | None:
        return next((t for r, t in zip(self.rewards, self.at_s, strict=True) if r >= threshold), None)

    def per_step(self) -> float:
        gaps = [b - a for a, b in zip(self.at_s, self.at_s[1:], strict=False)]
        return sum(gaps) / len(gaps) if gaps else float("nan")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def score(answer: str, expected: str) -> float:
    """examples/demo/verify.py's rule (that file is a script reading its environment, so not importable)."""
    got, want = words(answer), expected.lower()
    if got == [want]:
        return 1.0
    if want in got and len(got) <= 12 and got.count(want) == 1:
        return 0.25
    return 0.0


def tasks(n: int) -> list[dict]:
    """The demo's first ``n`` training tasks as single prompts carrying the fact the agent's search finds."""
    spec = importlib.util.spec_from_file_location("demo_agent", DEMO / "agent.py")
    agent = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(agent)  # type: ignore[union-attr]
    out = []
    for line in (DEMO / "train.jsonl").read_text().splitlines()[:n]:
        t = json.loads(line)
        q = t["input"]["question"]
        out.append({"id": t["id"], "prompt": f"{agent.search(q)}\n{q} Reply with only the name.",
                    "answer": t["verifier_input"]["answer"]})
    return out


def run_harnessrl(items: list[dict], args: argparse.Namespace, work: Path) -> Curve:
    (work / "agent.py").write_text(AGENT)
    with (work / "train.jsonl").open("w") as f:
        for t in items:
            f.write(json.dumps({"id": t["id"], "input": {"prompt": t["prompt"]},
                                "verifier_input": {"answer": t["answer"]}}) + "\n")
    lora = ", ".join(f'"{m}"' for m in LORA_MODULES)
    (work / "config.toml").write_text(f"""
[run]
name = "loop-vs-trl"
dir = "{work / 'run'}"
steps = {args.steps}
tasks_per_step = {args.prompts}
attempts_per_task = {args.samples}
train_temperature = 1.0
seed = {args.seed}
[tasks]
train = "train.jsonl"
[engine]
kind = "embedded"
model = "smollm2"
max_batch = 32
[runner]
command = ["{sys.executable}", "agent.py"]
concurrency = {args.prompts * args.samples}
timeout_s = 900
[rewards]
verifier = ["{sys.executable}", "{DEMO / 'verify.py'}"]
[training]
lr = {args.lr}
estimator = "grpo"
normalization = "rollout"
micro_batch_tokens = 4096
gradient_checkpointing = false
dtype = "float32"
[training.lora]
r = 16
alpha = 32
target_modules = [{lora}]
""")
    curve = Curve("harnessrl")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "harnessrl.cli", "train", str(work / "config.toml")],
                            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "400"})
    assert proc.stdout is not None
    for line in proc.stdout:
        m = STEP.match(line.strip())
        if m:
            curve.rewards.append(float(m.group(2)))
            curve.at_s.append(time.perf_counter() - t0)
            for part, secs in TIMING.findall(line):
                curve.parts[part] = curve.parts.get(part, 0.0) + float(secs)
            print(f"  harnessrl step {m.group(1)}: reward {float(m.group(2)):.3f} at {curve.at_s[-1]:.0f}s", flush=True)
    if proc.wait() != 0:
        raise SystemExit(f"harnessrl train exited {proc.returncode}; its output is above")
    return curve


def run_trl(items: list[dict], args: argparse.Namespace, work: Path) -> Curve:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harnessrl.models import load_model

    curve = Curve("TRL")
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    model, tokenizer = load_model("smollm2")  # the same weights harnessrl's engine serves
    answers = {t["prompt"]: t["answer"] for t in items}
    data = Dataset.from_list([{"prompt": [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": t["prompt"]}]} for t in items])

    def reward(prompts: list, completions: list, **_: object) -> list[float]:
        return [score(c[-1]["content"], answers[p[-1]["content"]]) for p, c in zip(prompts, completions, strict=True)]

    class Log(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **_kw):  # type: ignore[no-untyped-def]
            if logs and "reward" in logs:
                curve.rewards.append(float(logs["reward"]))
                curve.at_s.append(time.perf_counter() - t0)
                print(f"  TRL step {state.global_step}: reward {curve.rewards[-1]:.3f} at {curve.at_s[-1]:.0f}s",
                      flush=True)

    config = GRPOConfig(
        output_dir=str(work / "trl"), max_steps=args.steps, learning_rate=args.lr, seed=args.seed,
        per_device_train_batch_size=args.prompts * args.samples, gradient_accumulation_steps=1,
        num_generations=args.samples, max_completion_length=16, temperature=1.0, top_p=1.0, beta=0.0,
        loss_type="grpo", scale_rewards="group", num_iterations=1, use_cpu=True, bf16=False, fp16=False,
        gradient_checkpointing=False, logging_steps=1, save_strategy="no", report_to=[],
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    peft = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=LORA_MODULES, task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data,
                          processing_class=tokenizer, peft_config=peft, callbacks=[Log()])
    trainer.train()
    return curve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threshold", type=float, default=0.5, help="mean training reward of one step")
    ap.add_argument("--prompts", type=int, default=6, help="tasks per step")
    ap.add_argument("--samples", type=int, default=4, help="samples (attempts) per task")
    ap.add_argument("--tasks", type=int, default=120, help="how many of the demo's training tasks to draw from")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trl-first", action="store_true")
    args = ap.parse_args()
    items = tasks(args.tasks)
    with tempfile.TemporaryDirectory(prefix="loop-vs-trl-") as tmp:
        work = Path(tmp)
        order = [run_trl, run_harnessrl] if args.trl_first else [run_harnessrl, run_trl]
        curves = {}
        for fn in order:
            side = work / fn.__name__
            side.mkdir()
            print(f"{fn.__name__.removeprefix('run_')}: {args.steps} steps of {args.prompts} x {args.samples}", flush=True)
            c = fn(items, args, side)
            curves[c.name] = c
    print(f"\n{'':10} {'steps':>5} {'first reward':>12} {'last reward':>11} {'s/step':>7} "
          f"{'s to ' + format(args.threshold, 'g'):>8}")
    for c in curves.values():
        reached = c.time_to(args.threshold)
        print(f"{c.name:10} {len(c.rewards):>5} {c.rewards[0] if c.rewards else float('nan'):>12.3f} "
              f"{c.rewards[-1] if c.rewards else float('nan'):>11.3f} {c.per_step():>7.1f} "
              f"{'not reached' if reached is None else format(reached, '.0f'):>8}")
    ours, theirs = curves["harnessrl"], curves["TRL"]
    a, b = ours.time_to(args.threshold), theirs.time_to(args.threshold)
    print(f"seconds per step, harnessrl / TRL: {ours.per_step() / theirs.per_step():.2f}")
    if ours.parts and ours.rewards:  # where harnessrl's step goes (its step line); TRL's is one process
        print("harnessrl per step: " + ", ".join(f"{k} {v / len(ours.rewards):.1f}s" for k, v in ours.parts.items())
              + f" (start-up to the end of step 1: {ours.at_s[0]:.0f}s; TRL's: {theirs.at_s[0]:.0f}s)")
    if a is not None and b is not None:
        verdict = "meets" if a <= b else "misses"
        print(f"time to reward {args.threshold:g}, harnessrl / TRL: {a / b:.2f} ({verdict} the target of <= 1.0)")
    else:
        print(f"time to reward {args.threshold:g}: not reached by "
              f"{' and '.join(c.name for c in curves.values() if c.time_to(args.threshold) is None)}; no ratio")


if __name__ == "__main__":
    main()
