"""The dashboard's pure parts on hand-checked examples: charts, run files, turns, token cells, segments."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harnessrl.conversation import request_turns, response_turns
from harnessrl.inspection.rollout_view import sample_segments
from harnessrl.types import Run, Sample, SampleFidelity
from harnessrl.ui.auth import _safe_next
from harnessrl.ui.plots import Series, line_chart
from harnessrl.ui.runfiles import find_run_dir, load_run_files
from harnessrl.ui.tokens import token_cells


def test_chart_points_and_escaping() -> None:
    svg = str(line_chart("<t>", [Series('a"<b>', [(0, 1.0), (2, 3.0), (1, 2.0)]), Series("empty", [])]))
    assert "<t>" not in svg and "&lt;t&gt;" in svg and 'a"<b>' not in svg
    pts = re.search(r'<polyline points="([^"]+)"', svg)
    assert pts is not None
    xy = [tuple(map(float, p.split(","))) for p in pts.group(1).split()]
    assert [x for x, _ in xy] == sorted(x for x, _ in xy)  # drawn in x order
    assert xy[0][1] > xy[1][1] > xy[2][1]  # larger values higher up (smaller SVG y)
    assert svg.count("<circle") == 3
    assert "no data yet" in str(line_chart("x", [Series("s", [])]))
    assert "<circle" in str(line_chart("flat", [Series("s", [(1, 5.0)])]))  # one point, flat range


def test_run_files_tolerate_cut_lines_and_nan(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "loss": 0.5, "note": "x"}) + "\n" + json.dumps({"step": 2, "loss": None}) + "\n{\"st")
    (tmp_path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"event": "eval", "policy_version": 0, "mean_reward": float("nan"), "tasks": 0},
        {"event": "step", "step": 1, "reward_mean": 0.25},
        {"event": "eval", "policy_version": 1, "mean_reward": 0.5, "tasks": 3}]))
    f = load_run_files(tmp_path)
    assert f.metric_names() == ["loss"] and f.series("loss") == [(1.0, 0.5)]
    assert f.train_reward() == [(1.0, 0.25)] and f.held_out_reward() == [(1.0, 0.5)]
    assert load_run_files(None).train_reward() == []
    (tmp_path / "events.jsonl").unlink()
    with (tmp_path / "metrics.jsonl").open("a") as out:
        out.write("\n" + json.dumps({"step": 2, "eval/reward_mean": 0.75, "eval/tasks": 3}) + "\n")
    f = load_run_files(tmp_path)
    assert f.held_out_reward() == [(2.0, 0.75)] and f.metric_names() == ["loss"]


def test_find_run_dir(tmp_path: Path) -> None:
    mine, other, loose = tmp_path / "mine", tmp_path / "other", tmp_path / "loose"
    for d, rid in ((mine, "r1"), (other, "r2")):
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"run_id": rid}))
    loose.mkdir()
    run = Run("r1", "n", {}, 0.0)
    assert find_run_dir(run, [other, mine]) == mine
    assert find_run_dir(Run("r1", "n", {"run": {"dir": str(mine)}}, 0.0), []) == mine
    assert find_run_dir(run, [], store_url=f"sqlite:///{mine}/store.db") == mine
    assert find_run_dir(Run("r9", "n", {}, 0.0), [other, loose]) == loose  # the one without run.json
    assert find_run_dir(Run("r9", "n", {}, 0.0), [other]) is None


def test_safe_next_stays_on_the_dashboard() -> None:
    assert _safe_next("/ui/rollouts?x=1", "/ui") == "/ui/rollouts?x=1"
    for evil in ("//evil.example/", "https://evil.example/", "/other", "/ui\\@evil"):
        assert _safe_next(evil, "/ui") == "/ui/"
    assert _safe_next("/rollouts", "") == "/rollouts" and _safe_next("//x", "") == "/"


def test_turns_of_each_api() -> None:
    chat = request_turns({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                       {"role": "assistant", "content": None, "tool_calls": [
                                           {"function": {"name": "bash", "arguments": "{\"c\": 1}"}}]}]})
    assert [(t.role, t.text) for t in chat] == [("user", "hi"), ("assistant", '→ tool call bash({"c": 1})')]
    anthropic = request_turns({"system": "be brief", "messages": [{"role": "user", "content": "q"}]})
    assert [(t.role, t.text) for t in anthropic] == [("system", "be brief"), ("user", "q")]
    responses = request_turns({"instructions": "sys", "input": "q"})
    assert [(t.role, t.text) for t in responses] == [("instructions", "sys"), ("user", "q")]
    assert request_turns({"prompt": [1, 2]})[0].text == "[1, 2]"
    out = response_turns({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "a"}},
                                      {"text": "b"}]})
    assert [(t.role, t.text) for t in out] == [("choice 0 (stop)", "a"), ("choice 1", "b")]
    msg = response_turns({"type": "message", "stop_reason": "end_turn", "content": [{"type": "text", "text": "x"}]})
    assert msg[0].text == "x" and response_turns(None) == []


def test_token_cells_buckets_and_trained_prefix() -> None:
    lps = [math.log(p) for p in (0.95, 0.6, 0.3, 0.1, 0.01)]
    cells = token_cells([5, 6, 7, 8, 9], lps, 3, lambda ids: [f"<{i}>" for i in ids])
    assert [c.lp_class for c in cells] == ["lp4", "lp3", "lp2", "lp1", "lp0"]
    assert [c.trained for c in cells] == [True, True, True, False, False]
    assert [c.text for c in token_cells([1], None, 0, None)] == ["[1]"]
    assert token_cells([1], None, 0, None)[0].lp_class == "lpn"


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5)), min_size=1, max_size=6), st.integers(0, 4))
def test_segments_cover_the_sample(parts: list[tuple[int, int]], tail: int) -> None:
    tokens, spans, pos = [], [], 0
    for ctx, comp in parts:
        tokens += [0] * ctx + [1] * comp
        spans.append((pos + ctx, pos + ctx + comp))
        pos += ctx + comp
    tokens += [0] * tail
    s = Sample("r", "g", tokens, tokens, [0.0] * len(tokens), [0] * len(parts), list(range(len(parts))),
               SampleFidelity.EXACT, call_spans=spans)
    segs = sample_segments(s)
    assert sum(n for _, n, _ in segs) == len(tokens)
    assert sum(n for k, n, _ in segs if k == "completion") == sum(tokens)
