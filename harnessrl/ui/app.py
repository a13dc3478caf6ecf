"""The dashboard's web application: server-rendered pages over a store (Starlette + Jinja2).

``dashboard_app(store)`` is a plain ASGI app: ``harnessrl ui`` serves it alone, the gateway mounts it at
``/ui`` behind its admin token. Handlers are synchronous (Starlette runs them in its thread pool) because
the store is. Jinja2 autoescaping is on: prompts and completions are untrusted text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from harnessrl.conversation import pretty_json, request_turns, response_turns
from harnessrl.inspection.rollout_pages import Filters, rollout_page
from harnessrl.inspection.rollout_view import call_training, judge_exchange, rollout_view, sample_segments
from harnessrl.store import NotFound, Store
from harnessrl.training.samples import redacted_positions
from harnessrl.types import FailureKind, RolloutStatus, Run
from harnessrl.ui.auth import VIEWER
from harnessrl.ui.headline import PHASES, cost_rows, headline, step_costs, step_times
from harnessrl.ui.metric_groups import denoise, group_metrics
from harnessrl.ui.plots import Bar, Mark, Series, line_chart, stacked_bars
from harnessrl.ui.runfiles import find_run_dir, load_run_files
from harnessrl.ui.tokens import Tokenizers, token_cells

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
#: Longest token list the call page renders (a larger prompt shows its tail).
MAX_TOKENS_SHOWN = 20_000
#: Attempts in flight the run page counts (per status); beyond, it says "500+".
IN_FLIGHT_SHOWN = 500


def _fmt_time(t: float | None) -> str:
    import time

    return "" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _fmt_s(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def _fmt_cost(v: float | None, name: str) -> str:
    """A cost figure (``harnessrl/run_cost.py``) by its kind: seconds, bytes as GiB, else a count."""
    if v is None:
        return "n/a"
    if name.endswith("_s"):
        return _fmt_s(v)
    if name.endswith("_bytes"):
        return f"{v / 2**30:.2f} GiB"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"


def _fmt_num(v: float | None) -> str:
    return "" if v is None else f"{denoise(v):.4g}"


def _fmt_reward(v: float | None) -> str:
    """Held-out and training rewards, as the terminal prints them (``run.py``)."""
    return "n/a" if v is None else f"{v:.2f}"


def _metric_chart(name: str, points: list[tuple[float, float]]) -> Markup:
    """A small chart of one trainer metric, titled with its latest value."""
    last = _fmt_num(points[-1][1]) if points else "n/a"
    return line_chart(f"{name} = {last}", [Series(name, points)], width=300, height=170)


class Dashboard:
    """Pages over ``store``; ``run_dirs`` are where to look for run directories (metrics, events)."""

    def __init__(self, store: Store, *, run_dirs: Sequence[Path] = (), store_url: str | None = None,
                 tokenizer: str | None = None) -> None:
        self.store = store
        self.run_dirs = [Path(d) for d in run_dirs]
        self.store_url = store_url
        self.tokenizers = Tokenizers(tokenizer)
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"),
                               autoescape=select_autoescape(default=True, default_for_string=True))
        self.env.filters.update(time=_fmt_time, secs=_fmt_s, num=_fmt_num, reward=_fmt_reward, cost=_fmt_cost,
                                q=lambda v: quote(str(v), safe=""))
        self.env.globals.update(statuses=[s.value for s in RolloutStatus], failures=[k.value for k in FailureKind],
                                urlencode=urlencode)

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        html = self.env.get_template(name).render(root=root, **ctx)
        return HTMLResponse(html, status_code=status, headers={
            "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    def not_found(self, request: Request, what: str) -> HTMLResponse:
        return self.render(request, "error.html", status=404, message=f"{what} does not exist")

    # -- pages ----------------------------------------------------------------------------------------
    def runs(self, request: Request) -> Response:
        return self.render(request, "runs.html", runs=list(reversed(self.store.list_runs())))

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run"]
        try:
            run = self.store.get_run(run_id)
        except NotFound:
            return self.not_found(request, f"run {run_id!r}")
        f = Filters.parse(request.query_params, run=run.id)
        rows, more = rollout_page(self.store, f)
        return self.render(request, "run.html", run=run, **self._live(run),
                           versions=self.store.list_policy_versions(run.id), rows=rows, more=more, f=f,
                           base=f"/runs/{quote(run.id, safe='')}", config_json=pretty_json(run.config))

    def run_live(self, request: Request) -> Response:
        """The run page's headline and metrics alone: what its script fetches every few seconds while the
        run has not ended."""
        run_id = request.path_params["run"]
        try:
            run = self.store.get_run(run_id)
        except NotFound:
            return self.not_found(request, f"run {run_id!r}")
        return self.render(request, "_live.html", run=run, **self._live(run))

    def _live(self, run: Run) -> dict[str, Any]:
        files = load_run_files(find_run_dir(run, self.run_dirs, self.store_url))
        in_flight = [r for s in (RolloutStatus.QUEUED, RolloutStatus.RUNNING)
                     for r in self.store.list_rollouts(run_id=run.id, status=s, limit=IN_FLIGHT_SHOWN + 1)]
        h = headline(run, files, min(len(in_flight), IN_FLIGHT_SHOWN),
                     in_flight_capped=len(in_flight) > IN_FLIGHT_SHOWN)
        marks = [Mark(e.policy_version, f"v{e.policy_version} {_fmt_reward(e.mean_reward)}") for e in h.evaluations]
        reward = line_chart("reward", [Series("train (mean per step)", files.train_reward()),
                                       Series("held-out (per evaluation)", files.held_out_reward())],
                            width=660, height=260, marks=marks)
        bars = [Bar(step, [(f"phase-{k}", PHASES.get(k, k), v) for k, v in parts])
                for step, parts in step_times(files.steps)]
        time_chart = stacked_bars("seconds per step: rollouts, training, publishing", bars, width=560, height=260)
        groups = [(g, [_metric_chart(name, files.series(name)) for name in g.names])
                  for g in group_metrics(files.metric_names())]
        return {"files": files, "h": h, "reward_chart": reward, "time_chart": time_chart, "groups": groups,
                "cost_rows": cost_rows(h.cost) if h.cost is not None else [], "step_costs": step_costs(files),
                "live": run.ended_at is None}

    def eval(self, request: Request) -> Response:
        """``harnessrl eval``'s matrix, comparisons and per-task grid, read from the store as the command
        prints them (docs/eval.md)."""
        from harnessrl.evaluation import report
        from harnessrl.evaluation.results import figures_of_run

        run_id = request.path_params["run"]
        try:
            run = self.store.get_run(run_id)
        except NotFound:
            return self.not_found(request, f"run {run_id!r}")
        config = run.config if isinstance(run.config, dict) else {}
        fig = figures_of_run(self.store, run.id, config)
        return self.render(request, "eval.html", run=run, fig=fig, headers=report.headers(fig),
                           rows=[report.row(c) for c in fig.cells], signed=report.signed,
                           mark=lambda a: report.grid_symbol(a.reward, a.infra, fig.success_at))

    def rollouts(self, request: Request) -> Response:
        f = Filters.parse(request.query_params)
        rows, more = rollout_page(self.store, f)
        return self.render(request, "rollouts.html", rows=rows, more=more, f=f, base="/rollouts")

    def rollout(self, request: Request) -> Response:
        rid = request.path_params["rollout"]
        try:
            v = rollout_view(self.store, rid)
        except NotFound:
            return self.not_found(request, f"rollout {rid!r}")
        trained = {c.index: call_training(c, v.samples) for c in v.calls}
        segments = [sample_segments(s) for s in v.samples.samples]
        judge_prompt, judge_answer = judge_exchange(self.store, v.judge_calls[-1]) if v.judge_calls else (None, None)
        return self.render(request, "rollout.html", v=v, trained=trained, segments=segments,
                           input_json=pretty_json(v.rollout.input), metadata_json=pretty_json(v.rollout.metadata),
                           judge_prompt=judge_prompt, judge_answer=judge_answer)

    def call(self, request: Request) -> Response:
        rid = request.path_params["rollout"]
        try:
            index = int(request.path_params["index"])
            v = rollout_view(self.store, rid)
            call = next(c for c in v.calls if c.index == index)
        except (NotFound, ValueError, StopIteration):
            return self.not_found(request, f"call {request.path_params['index']!r} of rollout {rid!r}")
        training = call_training(call, v.samples)
        decode = self.tokenizers.decoder(v.run.config if v.run else None)
        prompt = call.prompt_token_ids
        cut = max(0, len(prompt) - MAX_TOKENS_SHOWN)
        hidden = redacted_positions(call, None)
        prompt_cells = token_cells(prompt[cut:], None, 0, decode, {i - cut for i in hidden if i >= cut})
        s = training.sample
        span = s.call_spans[s.call_indices.index(call.index)] if s is not None else (0, 0)
        completion_cells = token_cells(call.completion_token_ids, call.completion_logprobs,
                                       span[1] - span[0], decode, redacted_positions(call, 0))
        # Viewers see tokens as text; the raw IDs only when they ask (?ids=1). Operators always.
        show_ids = getattr(request.state, "harnessrl_role", None) != VIEWER or request.query_params.get("ids") == "1"
        return self.render(
            request, "call.html", v=v, call=call, training=training, prompt_cells=prompt_cells, show_ids=show_ids,
            prompt_cut=cut, completion_cells=completion_cells, decoded=decode is not None,
            tokenizer=self.tokenizers.spec_for(v.run.config if v.run else None),
            request_turns=request_turns(call.request), response_turns=response_turns(call.response),
            request_json=pretty_json(call.request), response_json=pretty_json(call.response),
            sampling_json=pretty_json(call.sampling))

    def deployments(self, request: Request) -> Response:
        from harnessrl.ui.deployments import deployment_panels

        return self.render(request, "deployments.html", panels=deployment_panels(self.store))

    def login(self, request: Request) -> Response:
        return self.render(request, "login.html", failed=request.query_params.get("failed") == "1",
                           next=request.query_params.get("next", ""))

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/", self.runs, methods=["GET"]),
            Route("/runs/{run}", self.run, methods=["GET"]),
            Route("/runs/{run}/live", self.run_live, methods=["GET"]),
            Route("/evals/{run}", self.eval, methods=["GET"]),
            Route("/rollouts", self.rollouts, methods=["GET"]),
            Route("/rollouts/{rollout}", self.rollout, methods=["GET"]),
            Route("/rollouts/{rollout}/calls/{index}", self.call, methods=["GET"]),
            Route("/deployments", self.deployments, methods=["GET"]),
            Route("/login", self.login, methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ])

