"""``harnessrl judge-check CONFIG``: does the configured judge agree with people? Measure before training.

A model grader has biases of its own, and RL will find them. This command scores a labelled set (a JSONL
of tasks with answers people marked good or bad) with exactly the judge ``[rewards.judge]`` configures,
and prints:

- **accuracy**: the share of answers whose score is on the same side of ``--threshold`` as the label;
- **Spearman** rank correlation between scores and labels (ties get average ranks);
- **position bias** (group mode): every group is judged again in ``--shuffles`` shuffled orders; the mean
  change of an answer's score when only its place changed, how often the best-scored answer changed, and
  the mean (signed) change of an answer moved to the first and to the last place. An unbiased judge moves
  nothing.

Labelled JSONL, one answer per line; lines with the same ``task_id`` form a group (in file order)::

    {"task_id": "atlas-000", "input": {"question": "..."}, "rubric": "...", "answer": "Shalo", "label": 1}

``rubric`` may be left out (the config's is used); ``answer`` is the attempt's final answer, or give
``messages`` (a chat transcript, OpenAI shape) instead. ``label`` is a number in [0, 1] (good = 1).
Nothing is written to a store; the cache lives for this command only, so a shuffled order is paid for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """``harnessrl judge-check`` on the CLI's subparsers."""
    p = sub.add_parser("judge-check", help="score a labelled set with the configured judge: accuracy, Spearman, "
                       "position bias", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="TOML config with a [rewards.judge] section")
    p.add_argument("--labelled", help="labelled JSONL (default: labelled.jsonl beside the config)")
    p.add_argument("--url", help="judge endpoint, overriding [rewards.judge] url")
    p.add_argument("--shuffles", type=int, default=2, help="shuffled orders per group for the position check")
    p.add_argument("--threshold", type=float, default=0.5, help="score (and label) at or above which an answer is good")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harnessrl.config import ConfigError, load_config
    from harnessrl.rewards.judge import Judge
    from harnessrl.rewards.judge_agreement import CheckReport, check, load_labelled
    from harnessrl.rewards.judge_client import JudgeSetupError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    jc = config.rewards.judge
    if jc is None:
        raise SystemExit(f"{args.config} has no [rewards.judge] section to check")
    if args.url:
        jc = jc.model_copy(update={"url": args.url})
    if jc.url == "policy":
        raise SystemExit('judge-check needs a judge endpoint: [rewards.judge] url = "policy" is the run\'s own '
                         "engine, which only exists during a run; pass --url http://HOST:PORT/v1")
    labelled = Path(args.labelled) if args.labelled else Path(args.config).resolve().parent / "labelled.jsonl"
    if not labelled.is_file():
        raise SystemExit(f"labelled set not found: {labelled} (pass --labelled FILE.jsonl)")

    async def run() -> CheckReport:
        judge = Judge(jc.model_copy(update={"cache": True}), url=jc.url, store=None, base_dir=config.base_dir)
        try:
            rows = load_labelled(labelled, judge.rubric, max_transcript_chars=jc.max_transcript_chars,
                                 max_turn_chars=jc.max_turn_chars)
            return await check(judge, rows, shuffles=args.shuffles, threshold=args.threshold,
                               seed=config.run.seed)
        finally:
            await judge.aclose()

    try:
        report = asyncio.run(run())
    except JudgeSetupError as exc:
        raise SystemExit(f"harnessrl judge-check: {exc}") from None
    if args.json:
        print(json.dumps({k: v for k, v in vars(report).items()}))
    else:
        print("\n".join(report.lines()))
    return 0
