"""A simulated user population for a deployed app (the demo agent) behind production mode.

Each simulated session: a user asks one question from the demo's task files, the app (examples/demo/agent.py,
unmodified, as a subprocess) answers through the gateway with

    OPENAI_BASE_URL=<gateway>/p/<deployment>/s/<session>/v1   OPENAI_API_KEY=<app key>

and, after a delay, the user posts feedback to ``POST /p/<deployment>/feedback``. The feedback is noisy and
correlated with correctness, judged by the demo's own verifier (examples/demo/verify.py, unmodified: 1.0
for exactly the name, 0.25 for the name in a sentence): thumbs up (1) with probability
``up_base + up_slope * correct``, else thumbs down (0). Some users never rate; a few rate after the window
closed (the gateway answers 410, counted). Sessions arrive as a seeded Poisson process, so the same seed
asks the same questions of the same users with the same coin flips, whatever the timing.

Time is simulated by scaling: feedback windows of seconds instead of days (``[production.feedback]
window_s`` in the gateway's config must exceed ``--delay-max``).

    python users.py --gateway http://127.0.0.1:8470 --deployment support --key hrl-app-... \
        --sessions 200 --rate 0.5 --seed 0 --out sessions.jsonl

prints one line per session as it ends, then served-traffic reward per time bucket (and per serving
version when ``--admin-token`` lets it ask the gateway which version served each session).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent / "demo"


@dataclass
class Population:
    """Who the users are and how they behave; every random choice derives from ``seed``."""

    gateway: str
    deployment: str
    key: str
    tasks: list[dict[str, Any]]
    sessions: int = 100
    duration_s: float | None = None  # stop launching after this long (whichever comes first)
    rate: float = 0.5  # sessions per second (Poisson arrivals)
    concurrency: int = 8  # sessions in flight at most (the app's own capacity)
    users: int = 40
    silent_fraction: float = 0.2  # users who never rate
    late_fraction: float = 0.05  # ratings that arrive after the window closed (410 expected)
    up_base: float = 0.15
    up_slope: float = 0.8
    signal: str = "thumbs"  # "thumbs": 1/0, noisy as above; "resolved": the verifier's score itself (no noise)
    delay_min_s: float = 1.0
    delay_max_s: float = 6.0
    window_s: float = 10.0  # the gateway's [production.feedback] window_s (for late ratings)
    seed: int = 0
    session_prefix: str = "sim"
    agent: Path = DEMO / "agent.py"
    verifier: Path = DEMO / "verify.py"
    agent_timeout_s: float = 600.0


@dataclass
class SessionRecord:
    """What one simulated session did and saw (one line of ``--out``)."""

    index: int
    session_id: str
    user: int
    task_id: str
    started_s: float  # since the population started
    answered_s: float | None = None
    exit_code: int | None = None
    answer: str = ""
    correct: float | None = None  # the demo verifier's reward of the served answer; None: the app failed
    feedback: float | None = None  # the value posted; None: not rated
    feedback_status: int | None = None  # the gateway's HTTP status for it
    feedback_s: float | None = None
    error: str = ""
    version: int | None = None  # filled in afterwards from the gateway when it can be asked
    arm: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_tasks(paths: Iterable[Path]) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    for path in paths:
        tasks += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return tasks


class Users:
    """Runs a :class:`Population` against a gateway; ``records`` fills as sessions end."""

    def __init__(self, pop: Population, on_record: Callable[[SessionRecord], None] | None = None) -> None:
        self.pop = pop
        self.on_record = on_record
        self.records: list[SessionRecord] = []
        rng = random.Random(f"{pop.seed}:users")
        self.silent = [rng.random() < pop.silent_fraction for _ in range(pop.users)]
        self._t0 = 0.0
        self._pending: set[asyncio.Task[None]] = set()

    def now(self) -> float:
        return time.monotonic() - self._t0

    async def run(self, stop: asyncio.Event | None = None) -> list[SessionRecord]:
        """Launch sessions until ``sessions`` or ``duration_s`` (or ``stop``), then wait for every rating."""
        pop = self.pop
        arrivals = random.Random(f"{pop.seed}:arrivals")
        slots = asyncio.Semaphore(pop.concurrency)
        self._t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=60.0) as http:
            for i in range(pop.sessions):
                if stop is not None and stop.is_set():
                    break
                if pop.duration_s is not None and self.now() >= pop.duration_s:
                    break
                await asyncio.sleep(arrivals.expovariate(pop.rate) if pop.rate > 0 else 0.0)
                await slots.acquire()
                task = asyncio.create_task(self._session(http, i, slots))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
            while self._pending:
                await asyncio.gather(*list(self._pending))
        return sorted(self.records, key=lambda r: r.index)

    async def _session(self, http: httpx.AsyncClient, i: int, slots: asyncio.Semaphore) -> None:
        pop = self.pop
        rng = random.Random(f"{pop.seed}:session:{i}")  # this session's choices, whatever the timing
        user = rng.randrange(pop.users)
        task = pop.tasks[rng.randrange(len(pop.tasks))]
        record = SessionRecord(i, f"{pop.session_prefix}-{pop.seed}-{i:05d}", user, task["id"], self.now())
        try:
            await self._ask(task, record)
        finally:
            slots.release()  # the app is free; the user may still rate later
        if record.correct is not None and not self.silent[user]:
            await self._rate(http, rng, record)
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)

    async def _ask(self, task: dict[str, Any], record: SessionRecord) -> None:
        pop = self.pop
        base = f"{pop.gateway.rstrip('/')}/p/{pop.deployment}/s/{record.session_id}/v1"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HARNESSRL_", "ANTHROPIC_"))}
        env.update(OPENAI_BASE_URL=base, OPENAI_API_KEY=pop.key)
        with tempfile.TemporaryDirectory(prefix="sim-user-") as work:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(pop.agent), task["input"]["question"], cwd=work, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            try:
                _, err = await asyncio.wait_for(proc.communicate(), pop.agent_timeout_s)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                err = b"timed out"
            except asyncio.CancelledError:  # the simulation is stopping: no app outlives it
                proc.kill()
                raise
            record.exit_code = proc.returncode
            record.answered_s = self.now()
            answer = Path(work, "answer.txt")
            if proc.returncode != 0 or not answer.is_file():
                record.error = err.decode(errors="replace").strip().splitlines()[-1:][0][:300] if err else "no answer"
                return
            record.answer = answer.read_text()[:200]
            record.correct = await self._verify(task, work)

    async def _verify(self, task: dict[str, Any], work: str) -> float:
        env = dict(os.environ, HARNESSRL_VERIFIER_INPUT=json.dumps(task["verifier_input"]))
        proc = await asyncio.create_subprocess_exec(sys.executable, str(self.pop.verifier), cwd=work, env=env,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        return float(out.decode().strip().splitlines()[-1])

    async def _rate(self, http: httpx.AsyncClient, rng: random.Random, record: SessionRecord) -> None:
        pop = self.pop
        assert record.correct is not None
        value = 1.0 if rng.random() < min(1.0, pop.up_base + pop.up_slope * record.correct) else 0.0
        if pop.signal == "resolved":  # a business outcome that is exactly the answer's worth
            value = record.correct
        late = rng.random() < pop.late_fraction
        delay = pop.window_s + rng.uniform(1.0, 3.0) if late else rng.uniform(pop.delay_min_s, pop.delay_max_s)
        await asyncio.sleep(delay)
        try:
            resp = await http.post(f"{pop.gateway.rstrip('/')}/p/{pop.deployment}/feedback",
                                   headers={"Authorization": f"Bearer {pop.key}"},
                                   json={"session_id": record.session_id, "name": pop.signal, "value": value})
        except httpx.HTTPError as exc:  # the gateway went away (the end of a simulation phase)
            record.extra["feedback_error"] = f"{type(exc).__name__}: {exc}"
            return
        record.feedback, record.feedback_status, record.feedback_s = value, resp.status_code, self.now()
        if resp.status_code >= 400:
            record.extra["feedback_error"] = resp.text[:300]


def mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def fmt(x: float | None) -> str:
    return "   -" if x is None else f"{x:.2f}"


def summarize(records: list[SessionRecord], bucket_s: float) -> str:
    """Served-traffic reward per time bucket (by session start) and per serving version, as a table.

    ``correct``: the verifier's mean over the served answers (what the users really got); ``thumbs``: the
    mean of the ratings the gateway accepted; ``rated``: how many were accepted.
    """
    lines = [f"{'bucket':>13} {'sessions':>8} {'correct':>7} {'thumbs':>6} {'rated':>5}  by version (n: correct)"]
    buckets: dict[int, list[SessionRecord]] = defaultdict(list)
    for r in records:
        buckets[int(r.started_s // bucket_s)].append(r)
    for b in sorted(buckets):
        rs = buckets[b]
        served = [r for r in rs if r.correct is not None]
        rated = [r.feedback for r in served if r.feedback is not None and r.feedback_status is not None and r.feedback_status < 300]
        per_version: dict[int, list[float]] = defaultdict(list)
        for r in served:
            if r.version is not None and r.correct is not None:
                per_version[r.version].append(r.correct)
        versions = "  ".join(f"v{v}: {len(xs)}: {fmt(mean(xs))}"
                             for v, xs in sorted(per_version.items()))
        correct = fmt(mean([r.correct for r in served if r.correct is not None]))
        lines.append(f"{b * bucket_s:>5.0f}-{(b + 1) * bucket_s:<5.0f} s {len(rs):>8} {correct:>7} "
                     f"{fmt(mean(rated)):>6} {len(rated):>5}  {versions}")
    served = [r for r in records if r.correct is not None]
    status: dict[Any, int] = defaultdict(int)
    for r in records:
        if r.feedback_status is not None:
            status[r.feedback_status] += 1
    lines.append(f"{len(records)} sessions, {len(records) - len(served)} failed, feedback statuses "
                 f"{dict(sorted(status.items()))}; answers: "
                 + ", ".join(f"{v:g}: {sum(r.correct == v for r in served)}" for v in (1.0, 0.25, 0.0)))
    return "\n".join(lines)


def by_version(records: list[SessionRecord]) -> dict[int, tuple[int, float]]:
    """Per serving version: sessions served and their mean correctness."""
    out: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r.correct is not None and r.version is not None:
            out[r.version].append(r.correct)
    return {v: (len(xs), sum(xs) / len(xs)) for v, xs in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gateway", required=True, help="the gateway's base URL, e.g. http://127.0.0.1:8470")
    p.add_argument("--deployment", required=True)
    p.add_argument("--key", default=os.environ.get("SIM_APP_KEY"), help="an app key (or $SIM_APP_KEY)")
    p.add_argument("--tasks", nargs="+", type=Path, default=[DEMO / "train.jsonl", DEMO / "eval.jsonl"])
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--duration", type=float, default=None, help="stop launching sessions after this many s")
    p.add_argument("--rate", type=float, default=0.5, help="session arrivals per second")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--users", type=int, default=40)
    p.add_argument("--silent", type=float, default=0.2, help="fraction of users who never rate")
    p.add_argument("--late", type=float, default=0.05, help="fraction of ratings sent after the window")
    p.add_argument("--signal", choices=["thumbs", "resolved"], default="thumbs",
                   help="thumbs: 1/0, up with probability 0.15 + 0.8 * correct; resolved: the verifier's score")
    p.add_argument("--delay", type=float, nargs=2, default=[1.0, 6.0], metavar=("MIN", "MAX"))
    p.add_argument("--window", type=float, default=10.0, help="the gateway's feedback window_s")
    p.add_argument("--bucket", type=float, default=60.0, help="seconds per row of the summary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write one JSON line per session here")
    args = p.parse_args(argv)
    if not args.key:
        p.error("--key or $SIM_APP_KEY: an app key of the deployment (POST /admin/deployments/<d>/keys)")
    pop = Population(args.gateway, args.deployment, args.key, load_tasks(args.tasks), sessions=args.sessions,
                     duration_s=args.duration, rate=args.rate, concurrency=args.concurrency, users=args.users,
                     silent_fraction=args.silent, late_fraction=args.late, delay_min_s=args.delay[0],
                     delay_max_s=args.delay[1], window_s=args.window, seed=args.seed, signal=args.signal)

    def show(r: SessionRecord) -> None:
        print(f"{r.started_s:7.1f}s {r.session_id} {r.task_id} correct={fmt(r.correct)} "
              f"feedback={r.feedback} ({r.feedback_status}) {r.answer[:40]!r}{' ' + r.error if r.error else ''}",
              flush=True)

    records = asyncio.run(Users(pop, show).run())
    if args.out is not None:
        args.out.write_text("".join(json.dumps(asdict(r)) + "\n" for r in records))
    print(summarize(records, args.bucket))
    return 0 if any(r.correct is not None for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
