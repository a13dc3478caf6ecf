"""What the scripted engine makes each CLI do, with its own tools: read greet.py, replace its return line
by ``new``, run the test, answer. Arguments are the tools' own schemas (``{cwd}``: the workspace)."""

from __future__ import annotations

OLD = 'return "Hello " + name'
ANSWER = {"text": "Done: greet.py edited and the test run."}


def claude_code(new: str) -> list[dict]:
    return [
        {"tool": "Read", "arguments": {"file_path": "{cwd}/greet.py"}},
        {"tool": "Edit", "arguments": {"file_path": "{cwd}/greet.py", "old_string": OLD, "new_string": new}},
        {"tool": "Bash", "arguments": {"command": "python3 -m unittest", "description": "Run the tests"}},
        ANSWER,
    ]


def codex(new: str) -> list[dict]:
    # apply_patch run through exec_command: Codex intercepts it and applies the patch itself
    patch = f"apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: greet.py\n@@\n-    {OLD}\n+    {new}\n*** End Patch\nPATCH"
    return [
        {"tool": "exec_command", "arguments": {"cmd": "cat greet.py"}},
        {"tool": "exec_command", "arguments": {"cmd": patch}},
        {"tool": "exec_command", "arguments": {"cmd": "python3 -m unittest"}},
        ANSWER,
    ]


def opencode(new: str) -> list[dict]:
    return [
        {"tool": "read", "arguments": {"filePath": "{cwd}/greet.py"}},
        {"tool": "edit", "arguments": {"filePath": "{cwd}/greet.py", "oldString": OLD, "newString": new}},
        {"tool": "bash", "arguments": {"command": "python3 -m unittest", "description": "Run the tests"}},
        ANSWER,
    ]


def gemini_cli(new: str) -> list[dict]:
    return [
        {"tool": "read_file", "arguments": {"file_path": "{cwd}/greet.py"}},
        {"tool": "replace", "arguments": {"file_path": "{cwd}/greet.py", "instruction": "Fix the greeting.",
                                          "old_string": OLD, "new_string": new}},
        {"tool": "run_shell_command", "arguments": {"command": "python3 -m unittest", "description": "Run the tests"}},
        ANSWER,
    ]


def openhands(new: str) -> list[dict]:
    # The OpenHands SDK's default tools; its `finish` tool ends the conversation (a plain answer would too).
    return [
        {"tool": "file_editor", "arguments": {"command": "view", "path": "{cwd}/greet.py",
                                              "summary": "Read greet.py", "security_risk": "LOW"}},
        {"tool": "file_editor", "arguments": {"command": "str_replace", "path": "{cwd}/greet.py", "old_str": OLD,
                                              "new_str": new, "summary": "Fix greet", "security_risk": "LOW"}},
        {"tool": "terminal", "arguments": {"command": "python3 -m unittest", "summary": "Run the tests",
                                           "security_risk": "LOW"}},
        {"tool": "finish", "arguments": {"message": ANSWER["text"]}},
    ]


def qwen_code(new: str) -> list[dict]:
    # Qwen Code's own tools (a Gemini CLI fork, with Claude Code's argument names for edit)
    return [
        {"tool": "read_file", "arguments": {"file_path": "{cwd}/greet.py"}},
        {"tool": "edit", "arguments": {"file_path": "{cwd}/greet.py", "old_string": OLD, "new_string": new}},
        {"tool": "run_shell_command", "arguments": {"command": "python3 -m unittest", "description": "Run the tests",
                                                    "is_background": False}},
        ANSWER,
    ]


def cline(new: str) -> list[dict]:
    return [
        {"tool": "read_files", "arguments": {"files": [{"path": "{cwd}/greet.py"}]}},
        {"tool": "editor", "arguments": {"path": "{cwd}/greet.py", "old_text": OLD, "new_text": new}},
        {"tool": "run_commands", "arguments": {"commands": ["python3 -m unittest"]}},
        ANSWER,
    ]



def continue_cli(new: str) -> list[dict]:
    return [
        {"tool": "Read", "arguments": {"filepath": "{cwd}/greet.py"}},
        {"tool": "Edit", "arguments": {"file_path": "{cwd}/greet.py", "old_string": OLD, "new_string": new}},
        {"tool": "Bash", "arguments": {"command": "python3 -m unittest"}},
        ANSWER,
    ]


def pi(new: str) -> list[dict]:
    # Pi's edit takes a list of replacements, each matched against the original file
    return [
        {"tool": "read", "arguments": {"path": "greet.py"}},
        {"tool": "edit", "arguments": {"path": "greet.py", "edits": [{"oldText": OLD, "newText": new}]}},
        {"tool": "bash", "arguments": {"command": "python3 -m unittest"}},
        ANSWER,
    ]


def copilot(new: str) -> list[dict]:
    # GitHub Copilot CLI's own tools: view and edit take absolute paths; bash asks for a description
    return [
        {"tool": "view", "arguments": {"path": "{cwd}/greet.py"}},
        {"tool": "edit", "arguments": {"path": "{cwd}/greet.py", "old_str": OLD, "new_str": new}},
        {"tool": "bash", "arguments": {"command": "python3 -m unittest", "description": "Run the tests"}},
        ANSWER,
    ]


def hermes(new: str) -> list[dict]:
    # Hermes Agent's own tools (its venv, not .clis: not in SCRIPTS); patch's default mode is a replacement
    return [
        {"tool": "read_file", "arguments": {"path": "greet.py"}},
        {"tool": "patch", "arguments": {"mode": "replace", "path": "greet.py", "old_string": OLD, "new_string": new}},
        {"tool": "terminal", "arguments": {"command": "python3 -m unittest"}},
        ANSWER,
    ]


SCRIPTS = {"claude-code": claude_code, "codex": codex, "opencode": opencode, "gemini-cli": gemini_cli,
           "qwen-code": qwen_code, "cline": cline, "kilo": opencode,  # Kilo: built on OpenCode, its tools
           "continue": continue_cli, "pi": pi, "copilot": copilot}
BINARIES = {"claude-code": "claude", "codex": "codex", "opencode": "opencode", "gemini-cli": "gemini",
            "qwen-code": "qwen", "cline": "cline", "kilo": "kilo",
            "continue": "cn", "pi": "pi", "copilot": "copilot"}
