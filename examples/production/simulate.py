"""The production-mode simulation: a deployed app learns from its users' delayed, noisy feedback.

Two phases over one run directory and one store (``config.toml`` beside this file says what each key does):

1. **learn**: ``harnessrl train config.toml`` serves the deployment ``support`` (gateway in production
   mode, embedded SmolLM2) and trains off-policy on its recorded sessions; each update is a canary
   candidate. The simulated users (``users.py``) keep using the app until every candidate is decided.
2. **sabotage**: the same run restarted for one more update trained on *inverted* feedback
   (``[production.training] invert_feedback``): a deliberately worse candidate, which the canary should
   roll back by itself.

Before the users start, the driver checks that the app key opens only its own deployment (not ``/r/...``
training routes, not ``/admin``, not another deployment). At the end it prints served-traffic reward per
time bucket and per serving version, and every canary decision with its evidence; ``--out`` writes it all
as JSON.

    .venv/bin/python examples/production/simulate.py [--db postgresql://...] [--steps 2] [--out sim.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from users import DEMO, Population, SessionRecord, Users, load_tasks, summarize  # noqa: E402

DEPLOYMENT = "support"


# -- the config copy each phase runs on ------------------------------------------------------------------
def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # strings, numbers and booleans are written the same in TOML


def override(text: str, values: dict[str, dict[str, Any]]) -> str:
    """``text`` (TOML) with ``values[section][key]`` set: replaced where the key is, else added under the
    section's header, else in a new section at the end. Enough for this file's flat sections."""
    lines = text.splitlines()
    for section, keys in values.items():
        for key, value in keys.items():
            line = f"{key} = {toml_value(value)}"
            current, header, done = None, None, False
            for i, raw in enumerate(lines):
                m = re.match(r"^\s*\[([^\]]+)\]\s*(#.*)?$", raw)
                if m:
                    current = m.group(1).strip()
                    if current == section:
                        header = i
                    continue
                if current == section and re.match(rf"^\s*{re.escape(key)}\s*=", raw):
                    lines[i], done = line, True
                    break
            if done:
                continue
            if header is not None:
                lines.insert(header + 1, line)
            else:
                lines += ["", f"[{section}]", line]
    return "\n".join(lines) + "\n"


# -- one `harnessrl train` process -----------------------------------------------------------------------
@dataclass
class Serving:
    """A running ``harnessrl train`` process (gateway + engine + off-policy loop) and how to reach it."""

    proc: subprocess.Popen[bytes]
    url: str
    admin_token: str
    log: Path

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 60.0) -> int:
        """Interrupt the process group (the run resumes from its store and checkpoints)."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if not self.alive():
                break
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout_s / 2)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.returncode


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serving(config: Path, log: Path, admin_token: str, port: int, timeout_s: float = 600.0) -> Serving:
    env = dict(os.environ, HARNESSRL_ADMIN_TOKEN=admin_token, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    exe = Path(sys.executable).with_name("harnessrl")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "harnessrl.cli"]
    with log.open("ab") as out:
        proc = subprocess.Popen([*cmd, "train", str(config)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    serving = Serving(proc, f"http://127.0.0.1:{port}", admin_token, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not serving.alive():
            raise RuntimeError(f"harnessrl train exited ({proc.returncode}) before serving; see {log}:\n"
                               + log.read_text()[-3000:])
        try:
            r = httpx.get(f"{serving.url}/admin/deployments/{DEPLOYMENT}/canary", headers=serving.admin(),
                          timeout=5)
            if r.status_code == 200:
                return serving
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    serving.stop()
    raise RuntimeError(f"the gateway did not answer within {timeout_s:.0f} s; see {log}")


def app_key(serving: Serving, deployment: str = DEPLOYMENT, label: str = "simulated-users") -> str:
    r = httpx.post(f"{serving.url}/admin/deployments/{deployment}/keys", json={"label": label},
                   headers=serving.admin(), timeout=30)
    r.raise_for_status()
    return str(r.json()["api_key"])


def key_scope(serving: Serving, key: str) -> dict[str, int]:
    """HTTP statuses an app key gets outside its deployment: a training rollout's routes (a rollout made
    here through the admin API, then cancelled), the admin API, another deployment (created here); and its
    own deployment's models (200)."""
    other = "simulation-other"
    url, h = serving.url, {"Authorization": f"Bearer {key}"}
    httpx.post(f"{url}/admin/deployments", json={"name": other}, headers=serving.admin(), timeout=30)
    probe = httpx.post(f"{url}/admin/rollouts", json={"task_id": "key-scope-probe", "group_id": "key-scope-probe"},
                       headers=serving.admin(), timeout=30)
    probe.raise_for_status()
    rid = probe.json()["rollout_id"]
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    try:
        return {
            f"/p/{DEPLOYMENT}/v1/models (its own)": httpx.get(f"{url}/p/{DEPLOYMENT}/v1/models", headers=h).status_code,
            "/r/<rollout>/v1/chat/completions": httpx.post(f"{url}/r/{rid}/v1/chat/completions", json=chat,
                                                           headers=h, timeout=30).status_code,
            "/r/<rollout>/reward": httpx.post(f"{url}/r/{rid}/reward", json={"value": 1.0}, headers=h,
                                              timeout=30).status_code,
            "/admin/deployments": httpx.get(f"{url}/admin/deployments", headers=h).status_code,
            f"/p/{other}/v1/chat/completions": httpx.post(f"{url}/p/{other}/v1/chat/completions", json=chat,
                                                          headers=h, timeout=30).status_code,
        }
    finally:
        httpx.post(f"{url}/admin/rollouts/{rid}/status", json={"status": "cancelled"}, headers=serving.admin(),
                   timeout=30)


# -- a phase: users until every candidate of the run is decided ------------------------------------------
@dataclass
class Phase:
    name: str
    records: list[SessionRecord] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None
    wall_s: float = 0.0


async def run_users(serving: Serving, pop: Population, t_offset: float, max_s: float,
                    quiet: bool = False) -> list[SessionRecord]:
    """The users, until the train process ends (its last candidate decided) or ``max_s`` passes."""
    stop = asyncio.Event()

    def show(r: SessionRecord) -> None:
        r.started_s += t_offset
        if not quiet:
            print(f"  {r.started_s:7.1f}s {r.session_id} {r.task_id} correct={r.correct} "
                  f"feedback={r.feedback} ({r.feedback_status}) {r.answer[:32]!r} {r.error[:80]}", flush=True)

    users = Users(pop, show)
    task = asyncio.create_task(users.run(stop))
    t0 = time.monotonic()
    try:
        while not task.done():
            if not serving.alive() or time.monotonic() - t0 > max_s:
                stop.set()
                break
            await asyncio.sleep(1.0)
        return await task
    finally:
        if not task.done():  # interrupted: no app subprocess outlives the simulation
            task.cancel()


def served_by(store_url: str, records: list[SessionRecord]) -> None:
    """Fill in which version and arm served each session, from the store."""
    from harnessrl.store import open_store

    store = open_store(store_url)
    try:
        for r in records:
            try:
                s = store.get_session(DEPLOYMENT, r.session_id)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001  (a session whose first call never arrived)
                continue
            r.version, r.arm = s.policy_version, s.arm
            r.extra["outcome"], r.extra["outcome_status"] = s.outcome, s.outcome_status
    finally:
        store.close()


def decisions_of(store_url: str) -> list[dict[str, Any]]:
    from harnessrl.store import open_store

    store = open_store(store_url)
    try:
        return [asdict(d) for d in store.canary_decisions(DEPLOYMENT)]  # type: ignore[attr-defined]
    finally:
        store.close()


def decision_lines(decisions: list[dict[str, Any]], t0: float) -> list[str]:
    lines = []
    for d in decisions:
        if d["action"] == "hold":
            continue
        lines.append(f"  {d['created_at'] - t0:7.1f}s {d['action']:<8} stable v{d['stable_version']} "
                     f"candidate v{d['candidate_version']}: {d['reason']}")
    holds = sum(d["action"] == "hold" for d in decisions)
    lines.append(f"  ({len(decisions)} decisions recorded, {holds} of them hold)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=HERE / "config.toml")
    p.add_argument("--run-dir", type=Path, default=None, help="default: the config's [run] dir")
    p.add_argument("--db", default=None, help="store URL (default: SQLite in the run dir); postgresql://...")
    p.add_argument("--steps", type=int, default=None, help="phase 1 updates (default: the config's)")
    p.add_argument("--phases", default="learn,sabotage")
    p.add_argument("--rate", type=float, default=0.5, help="session arrivals per second")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--delay", type=float, nargs=2, default=[2.0, 15.0], metavar=("MIN", "MAX"))
    p.add_argument("--signal", choices=["thumbs", "resolved"], default="thumbs",
                   help="thumbs: 1/0, up with probability 0.15 + 0.8 * correct; resolved: the verifier's score")
    p.add_argument("--silent", type=float, default=0.2, help="fraction of users who never rate")
    p.add_argument("--late", type=float, default=0.05, help="fraction of ratings sent after the window (410)")
    p.add_argument("--tasks", type=int, default=None, help="ask only the first N questions (default: all 160)")
    p.add_argument("--bucket", type=float, default=120.0)
    p.add_argument("--max-phase-s", type=float, default=3600.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sabotage-lr", type=float, default=0.02,
                   help="phase 2's [training] lr: one update against the feedback at a high rate makes a clearly worse version")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config key for both phases (VALUE in TOML), e.g. production.canary.min_sessions=8")
    p.add_argument("--quiet", action="store_true", help="no line per session")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)

    import tomllib

    text = args.config.read_text()
    cfg = tomllib.loads(text)
    run_dir = (args.run_dir or (args.config.parent / cfg["run"]["dir"])).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    store_url = args.db or f"sqlite:///{run_dir / 'store.db'}"
    steps = args.steps if args.steps is not None else int(cfg["run"]["steps"])
    window_s = float(cfg["production"]["feedback"]["window_s"])
    extra: dict[str, dict[str, Any]] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        section, _, name = key.rpartition(".")
        extra.setdefault(section, {})[name] = tomllib.loads(f"v = {value}")["v"]
    tasks = load_tasks([DEMO / "train.jsonl", DEMO / "eval.jsonl"])[:args.tasks]
    admin_token = "hrl-admin-" + secrets.token_urlsafe(18)
    port = free_port()
    result: dict[str, Any] = {"config": str(args.config), "store": store_url.split("@")[-1], "phases": []}
    t_start = time.time()
    records: list[SessionRecord] = []
    key_checked = False
    for n, name in enumerate(args.phases.split(",")):
        overrides: dict[str, dict[str, Any]] = {
            "run": {"dir": str(run_dir), "steps": steps + (1 if name == "sabotage" else 0)},
            "gateway": {"port": port},
            "store": {"url": store_url},
        }
        for section, keys in extra.items():
            overrides.setdefault(section, {}).update(keys)
        if name == "sabotage":
            overrides.setdefault("production.training", {})["invert_feedback"] = True
            if args.sabotage_lr is not None:
                overrides.setdefault("training", {})["lr"] = args.sabotage_lr
        copy = run_dir / f"config.{name}.toml"
        copy.write_text(override(text, overrides))
        print(f"== phase {name}: harnessrl train {copy} (log {run_dir / f'{name}.log'})", flush=True)
        t0 = time.monotonic()
        serving = start_serving(copy, run_dir / f"{name}.log", admin_token, port)
        phase = Phase(name)
        try:
            key = app_key(serving)
            if not key_checked:
                result["key_scope"] = key_scope(serving, key)
                print(f"app key scope: {result['key_scope']}", flush=True)
                key_checked = True
            pop = Population(serving.url, DEPLOYMENT, key, tasks, sessions=100_000, rate=args.rate,
                             concurrency=args.concurrency, delay_min_s=args.delay[0], delay_max_s=args.delay[1],
                             window_s=window_s, seed=args.seed * 100 + n, session_prefix=f"sim-{name}",
                             signal=args.signal, silent_fraction=args.silent, late_fraction=args.late)
            offset = time.time() - t_start
            phase.records = asyncio.run(run_users(serving, pop, offset, args.max_phase_s, args.quiet))
        finally:
            phase.exit_code = serving.stop()
            phase.wall_s = time.monotonic() - t0
        served_by(store_url, phase.records)
        records += phase.records
        result["phases"].append(phase)
        print(f"== phase {name}: {len(phase.records)} sessions in {phase.wall_s:.0f} s, exit {phase.exit_code}",
              flush=True)
    decisions = decisions_of(store_url)
    print("\nserved-traffic reward (correct: the verifier's score of the answers served; thumbs: mean rating "
          "accepted), by session start:")
    print(summarize(records, args.bucket))
    print("\ncanary decisions:")
    print("\n".join(decision_lines(decisions, t_start)))
    if args.out is not None:
        result["decisions"] = decisions
        result["phases"] = [{**asdict(ph), "records": [asdict(r) for r in ph.records]} for ph in result["phases"]]
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    # A terminated driver unwinds like an interrupted one: the `finally` blocks stop `harnessrl train` and
    # the app processes instead of leaving them serving. Set here, not in main(): an in-process caller (the
    # e2e test under pytest) keeps its own handler.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main())
