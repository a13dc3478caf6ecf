"""Pure pieces of the runner: bounded output capture and the attempt environment."""

from __future__ import annotations

import json
import os
import sys

from hypothesis import given
from hypothesis import strategies as st

from harnessrl.runners.env import base_env, task_input_env
from harnessrl.runners.process import TailBuffer, describe_exit


@given(st.integers(0, 64), st.lists(st.binary(max_size=50), max_size=40))
def test_tail_buffer_keeps_exactly_the_tail_in_bounded_memory(limit: int, chunks: list[bytes]) -> None:
    buf = TailBuffer(limit)
    for chunk in chunks:
        buf.feed(chunk)
        assert buf.held_bytes <= 2 * limit + len(chunk)
    data = b"".join(chunks)
    assert buf.total == len(data)
    expected = data[-limit:] if limit else b""
    assert buf.text().endswith(expected.decode("utf-8", "replace"))
    assert ("earlier bytes not kept" in buf.text()) == (len(data) > len(expected))


def test_task_input_env_names_values_and_limits() -> None:
    env = task_input_env(
        {"prompt": "hi", "max-steps": 5, "opts": {"a": 1}, "blob": "z" * 50, "nul": "a\x00b"}, 40
    )
    assert env["HARNESSRL_TASK_PROMPT"] == "hi"
    assert env["HARNESSRL_TASK_MAX_STEPS"] == "5"
    assert json.loads(env["HARNESSRL_TASK_OPTS"]) == {"a": 1}
    assert "HARNESSRL_TASK_BLOB" not in env and "HARNESSRL_TASK_NUL" not in env
    assert "HARNESSRL_TASK_INPUT" not in env  # the whole input is over the limit too
    clash = task_input_env({"input": "x", "id": "y"}, 1000)
    assert json.loads(clash["HARNESSRL_TASK_INPUT"]) == {"input": "x", "id": "y"}
    assert "HARNESSRL_TASK_ID" not in clash  # the task id variable belongs to the runner


def test_base_env_inherits_only_listed_names_and_puts_our_python_first(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    env = base_env(["PATH", "HOME", "NOT_SET_ANYWHERE"])
    assert set(env) <= {"PATH", "HOME"}
    assert env["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    assert base_env(["PATH"], prepend_python_bin=False)["PATH"] == "/usr/bin:/bin"


def test_describe_exit() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(-9) == "killed by signal SIGKILL"
    assert describe_exit(None) == "did not exit"
