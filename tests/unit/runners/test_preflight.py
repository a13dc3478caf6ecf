"""Commands that cannot start are refused before a run begins; ones that might are let through."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harnessrl.runners.preflight import CommandNotFound, check_command


def test_found_commands_pass(tmp_path: Path) -> None:
    check_command([sys.executable, "x.py"], {"PATH": ""}, "runner.command")  # absolute and executable
    check_command(["python3"], {"PATH": os.environ["PATH"]}, "runner.command")
    check_command(["./run.sh"], {"PATH": ""}, "runner.command")  # a workspace file: checked per attempt


@pytest.mark.parametrize("argv, needle", [
    (["no-such-program-xyz"], "not found on the PATH"),
    (["/no/such/file"], "does not exist"),
    ([], "is empty"),
])
def test_commands_that_cannot_start_name_the_problem(argv: list[str], needle: str) -> None:
    with pytest.raises(CommandNotFound, match=needle) as info:
        check_command(argv, {"PATH": "/usr/bin"}, "rewards.verifier")
    assert str(info.value).startswith("rewards.verifier")


def test_a_file_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("echo hi\n")
    with pytest.raises(CommandNotFound, match="not executable"):
        check_command([str(script)], {}, "runner.command")
    script.chmod(0o755)
    check_command([str(script)], {}, "runner.command")


def test_the_path_searched_is_the_processs_not_ours(tmp_path: Path) -> None:
    tool = tmp_path / "my-harness"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    check_command(["my-harness"], {"PATH": str(tmp_path)}, "runner.command")
    with pytest.raises(CommandNotFound):
        check_command(["my-harness"], {"PATH": "/usr/bin"}, "runner.command")
