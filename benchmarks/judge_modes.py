"""Judge cost: group mode (one call per group, RULER-like) vs pointwise (one call per attempt), in one run.

What a judge model bills is its prompt and completion tokens; this measures what harnessrl sends it: judge
calls, prompt characters and answer characters for the same attempts in both modes, and the second pass of
each mode (the cache: nothing paid). The attempts are examples/judge/labelled.jsonl (12 atlas tasks, 5
answers each), grouped by task; the judge is the scripted one CI uses (tests/fakes/scripted_judge.py) on
loopback, so wall times show harnessrl's own overhead, not a model's.

    .venv/bin/python benchmarks/judge_modes.py [--labelled FILE.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.fake_engine import EngineServer  # noqa: E402
from fakes.scripted_judge import ScriptedJudge  # noqa: E402

from harnessrl.rewards.config import JudgeConfig  # noqa: E402
from harnessrl.rewards.judge import Judge  # noqa: E402
from harnessrl.rewards.judge_agreement import load_labelled  # noqa: E402


async def run(url: str, mode: str, groups: list[list], scripted: ScriptedJudge) -> dict[str, float]:
    judge = Judge(JudgeConfig(url=url, mode=mode, model="scripted-judge"), url=url, store=None)  # type: ignore[arg-type]
    out: dict[str, float] = {}
    try:
        for label in ("first", "again"):
            before = len(scripted.requests)
            started = time.perf_counter()
            verdicts = await asyncio.gather(*(judge.judge(g) for g in groups))
            sent = scripted.requests[before:]
            out[f"{label}_calls"] = len(sent)
            out[f"{label}_prompt_chars"] = sum(len(m["content"]) for b in sent for m in b["messages"])
            out[f"{label}_s"] = time.perf_counter() - started
            out["scored"] = sum(v.score is not None for vs in verdicts for v in vs)
    finally:
        await judge.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labelled", default=str(ROOT / "examples" / "judge" / "labelled.jsonl"))
    args = ap.parse_args()
    rows = load_labelled(Path(args.labelled), None)
    by_task: dict[str, list] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row.item)
    groups = list(by_task.values())
    scripted = ScriptedJudge()
    server = EngineServer(scripted).start()  # type: ignore[arg-type]
    try:
        results = {mode: asyncio.run(run(server.url, mode, groups, scripted)) for mode in ("pointwise", "group")}
    finally:
        server.stop()
    print(f"{len(rows)} attempts in {len(groups)} groups of {len(groups[0])}")
    for mode, r in results.items():
        print(f"{mode:9s}: {r['first_calls']:.0f} judge calls, {r['first_prompt_chars']:.0f} prompt chars, "
              f"{r['first_s'] * 1000:.0f} ms; again (cached): {r['again_calls']:.0f} calls, {r['again_s'] * 1000:.0f} ms;"
              f" scored {r['scored']:.0f}")
    p, g = results["pointwise"], results["group"]
    print(f"group vs pointwise: {p['first_calls'] / g['first_calls']:.1f}x fewer calls, "
          f"{p['first_prompt_chars'] / g['first_prompt_chars']:.2f}x fewer prompt characters")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
