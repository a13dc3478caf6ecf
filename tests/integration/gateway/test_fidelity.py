"""The engine-mode fidelity verdict (a pure function) on hand-checked examples."""

from harnessrl.gateway.fidelity import classify_prompt
from harnessrl.types import Fidelity


def test_classify_prompt():
    first = [1, 2, 3, 4, 5]  # prompt + completion of an earlier call
    assert classify_prompt([1, 2], []) == (Fidelity.RERENDERED, "first call of the rollout")
    assert classify_prompt([1, 2, 3, 4, 5], [first]) == (Fidelity.EXACT, None)
    assert classify_prompt((1, 2, 3, 4, 5, 6, 7), [first]) == (Fidelity.EXTENDED, None)
    verdict, reason = classify_prompt([1, 2, 9, 4, 5, 6], [first, [7, 7]])
    assert verdict == Fidelity.RERENDERED and "token 0" in reason  # vs the latest, [7, 7]
    assert "token 2" in classify_prompt([1, 2, 9, 4], [first])[1]
    # any earlier call may be the prefix (the harness went back to an older branch)
    assert classify_prompt([7, 7, 8], [[7, 7], first]) == (Fidelity.EXTENDED, None)
    assert classify_prompt([1, 2, 3], [first])[0] == Fidelity.RERENDERED  # shorter: history was edited
