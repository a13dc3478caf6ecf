"""The step line: the update's size instead of GRPO's ~0 loss, and a step whose attempts got no tool result."""

from __future__ import annotations

from harnessrl.config import HarnessConfig
from harnessrl.controller import StepReport
from harnessrl.step_line import ToolUse, step_line, step_tool_use, tool_phrase, tool_use, update_figure
from harnessrl.store import NewCall, open_store
from harnessrl.types import ApiKind, Call, CallStatus, ChoiceTokens

TRAINED = {"loss": -1.2e-9, "grad_norm": 0.41234, "updates": 1, "clip_fraction": 0.0, "approx_kl": 0.0,
           "entropy": 0.4512, "count/groups.trained": 3, "count/dynamic.groups": 4}


def _report(metrics: dict) -> StepReport:
    return StepReport(step=3, rollouts=8, failed=1, infra=0, reward_mean=0.5,
                      seconds={"rollouts": 30.2, "train": 5.0, "publish": 1.0}, metrics=metrics)


def test_a_step_that_trained_shows_its_gradient_norm_not_the_loss():
    line = step_line(3, HarnessConfig(), _report(TRAINED))
    assert line == ("step 3/10: reward 0.500 | rollouts 8 (failed 1, infra 0) | groups trained 3/4 | "
                    "grad norm 0.412 clip 0.000 kl 0.0000 entropy 0.45 | rollouts 30s train 5s publish 1s")
    assert "loss" not in line


def test_the_update_figure():
    assert update_figure({**TRAINED, "updates": 4, "grad_norm": 0.00123}) == "grad norm 0.00123 x4 updates"
    assert update_figure({"loss": 0.0, "grad_norm": 0.0, "updates": 0}) == "no update"
    assert update_figure({}) == "no update"
    # the SFT objectives' loss is a real figure: kept on the line
    assert update_figure({"loss": 1.23456, "grad_norm": 2.5, "updates": 1}, mode="rft") == "loss 1.2346 grad norm 2.5"
    # [policies]: one trainer each, keyed policy/<name>/...
    both = {"policy/coder/updates": 1, "policy/coder/grad_norm": 0.2, "policy/critic/updates": 2,
            "policy/critic/grad_norm": 0.7, "loss": 0.0}
    assert update_figure(both) == "grad norm 0.7 x3 updates"


def test_a_held_step_says_no_update():
    config = HarnessConfig()
    config.run.explore_until_reward = 1.0
    held = {**TRAINED, "updates": 0, "grad_norm": 0.0, "count/groups.trained": 0, "count/explore.held": 1}
    line = step_line(2, config, _report(held))
    assert "groups trained 0/4 (held: no 1 yet) | no update | rollouts 30s" in line
    assert "entropy" not in line and "kl" not in line  # no update: no update's diagnostics, no zeros


def _call(request: dict, response: dict | None = None) -> Call:
    return Call(rollout_id="r", index=0, api=ApiKind.CHAT, status=CallStatus.OK, request=request,
                response=response, prompt_token_ids=[1], choices=[], policy_version=0)


TOOLS = [{"type": "function", "function": {"name": "edit", "parameters": {}}}]
ASKS = {"choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                                       "function": {"name": "edit"}}]}}]}
ANSWERS = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}


def test_attempts_whose_tool_calls_never_got_a_result_are_reported():
    # each attempt stops after its first call, which asked for a tool (a harness at its permission prompt)
    stopped = [[_call({"messages": [{"role": "user", "content": "fix it"}], "tools": TOOLS}, ASKS)]] * 3
    use = tool_use(stopped)
    assert use == ToolUse(attempts=3, offered=3, called=3, results=0)
    phrase = tool_phrase(use)
    assert phrase is not None and phrase.startswith("no tool results: the model asked for tools in 3 of 3")
    assert "autonomy flag" in phrase
    line = step_line(1, HarnessConfig(), _report(TRAINED), use)
    assert line.endswith("publish 1s | " + phrase)


def test_one_tool_result_anywhere_in_the_step_is_enough():
    first = _call({"messages": [{"role": "user", "content": "fix it"}], "tools": TOOLS}, ASKS)
    ran = _call({"messages": [{"role": "user", "content": "fix it"},
                              {"role": "assistant", "tool_calls": ASKS["choices"][0]["message"]["tool_calls"]},
                              {"role": "tool", "tool_call_id": "c1", "content": "edited"}], "tools": TOOLS}, ANSWERS)
    use = tool_use([[first], [first, ran], [first]])
    assert use.results == 1 and tool_phrase(use) is None


def test_tool_results_in_each_api_shape():
    anthropic = {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                            "content": "ok"}]}], "tools": TOOLS}
    responses = {"input": [{"type": "function_call_output", "call_id": "c", "output": "ok"}], "tools": TOOLS}
    for request in (anthropic, responses):
        assert tool_use([[_call(request)]]).results == 1
    # asked for, in the Anthropic and Responses answer shapes
    for answer in ({"content": [{"type": "tool_use", "id": "t", "name": "edit", "input": {}}]},
                   {"output": [{"type": "function_call", "call_id": "c", "name": "edit", "arguments": "{}"}]}):
        assert tool_use([[_call({"input": "fix it", "tools": TOOLS}, answer)]]) == ToolUse(1, 1, 1, 0)


def test_no_phrase_without_tools_and_a_plain_one_when_none_was_called():
    plain = [[_call({"messages": [{"role": "user", "content": "hi"}]}, ANSWERS)]]
    assert tool_phrase(tool_use(plain)) is None  # tools were not offered: nothing to report
    assert "loss" not in step_line(1, HarnessConfig(), _report(TRAINED), tool_use(plain))
    offered = [[_call({"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}, ANSWERS)]] * 2
    assert tool_phrase(tool_use(offered)) == "no tool results: tools were offered in 2 of 2 attempts and none called"


def test_step_tool_use_reads_the_steps_attempts_from_the_store():
    store = open_store("sqlite:///:memory:")
    try:
        run = store.create_run("r", {})
        ids = [store.create_rollout(task_id="t", input={}, group_id="g", api_key_hash=f"h{i}", run_id=run.id,
                                    step=1 + (i == 2)).id for i in range(3)]
        asks = {"messages": [{"role": "user", "content": "fix it"}], "tools": TOOLS}
        ran = {**asks, "messages": [*asks["messages"], {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
        store.record_calls([NewCall(rollout_id=rid, api=ApiKind.CHAT, status=CallStatus.OK, request=req,
                                    response=ASKS, prompt_token_ids=[1, 2], choices=[ChoiceTokens([3], [-0.5])],
                                    policy_version=0)
                            for rid, req in ((ids[0], asks), (ids[1], asks), (ids[2], ran))])
        assert step_tool_use(store, run.id, 1) == ToolUse(attempts=2, offered=2, called=2, results=0)
        assert step_tool_use(store, run.id, 2).results == 1  # the attempt of step 2 got its tool result
    finally:
        store.close()


def test_greedy_calls_left_out_are_named_with_the_fix():
    config = HarnessConfig()
    config.run.train_temperature = None  # the harness's own temperature: aider asks for 0
    line = step_line(3, config, _report({**TRAINED, "count/excluded.greedy": 6}))
    assert line.endswith("| 6 greedy calls not trained (temperature 0: nothing to learn from; set [run] "
                         "train_temperature (e.g. 1.0))")
    assert "greedy" not in step_line(3, config, _report(TRAINED))
    # [policies]: summed over the trainers
    both = {**TRAINED, "policy/a/count/excluded.greedy": 2, "policy/b/count/excluded.greedy": 1}
    assert "| 3 greedy calls not trained" in step_line(3, HarnessConfig(), _report(both))
