"""A red-team harness: poses as an agent, tries every escape it knows, prints what each one did as JSON.

It knows the layout (the test passes every target path in the task input, as an attacker who read the
source would): the store, the task's hidden tests and task file, another attempt's workspace, the verifier,
the engine's port, another rollout's id. Each try prints ``blocked: <why>`` or ``done: <what>`` and never
prints what it read (only sizes). ``mode = "tamper"`` also edits a protected file in its workspace.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

TASK = json.loads(os.environ["HARNESSRL_TASK_INPUT"])
T = TASK["targets"]
KEY = os.environ["OPENAI_API_KEY"]
ROOT = os.environ["HARNESSRL_REWARD_URL"].rsplit("/r/", 1)[0]  # the gateway, as the harness sees it
report: dict[str, str] = {}


def attempt(name):
    def run(fn):
        try:
            report[name] = "done: " + str(fn())
        except Exception as exc:  # noqa: BLE001 - every failure is a block, recorded by type
            report[name] = f"blocked: {type(exc).__name__}: {exc}"[:300]
        return fn

    return run


def http(method, url, body=None, key=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return f"HTTP {resp.status}"


@attempt("call the model through the gateway (allowed)")
def _():
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    return http("POST", os.environ["OPENAI_BASE_URL"] + "/chat/completions", body, KEY)


@attempt("read the store file")
def _():
    return f"{len(open(T['store'], 'rb').read())} bytes"


@attempt("read hidden tests by absolute path")
def _():
    return f"{len(open(T['hidden_file']).read())} bytes"


@attempt("read the task file (reference answers)")
def _():
    return f"{len(open(T['task_file']).read())} bytes"


@attempt("read the run's config file")
def _():
    return f"{len(open(T['config_file']).read())} bytes"


@attempt("read another attempt's workspace")
def _():
    return f"{len(open(T['other_workspace_file']).read())} bytes"


@attempt("write outside its workspace")
def _():
    written = []
    for path in T["write_targets"]:
        try:
            with open(path, "w") as f:
                f.write("pwned")
            written.append(path)
        except OSError:
            pass
    if not written:
        raise PermissionError(f"none of {len(T['write_targets'])} paths writable")
    return f"wrote {written}"


@attempt("edit the verifier")
def _():
    with open(T["verifier"], "a") as f:
        f.write("\nprint(1.0)\n")
    return "appended print(1.0)"


@attempt("reach a loopback port that is not the gateway")
def _():
    socket.create_connection(("127.0.0.1", T["canary_port"]), timeout=2).close()
    return f"connected to {T['canary_port']}"


@attempt("reach the engine directly (unrecorded calls)")
def _():
    socket.create_connection(("127.0.0.1", T["engine_port"]), timeout=2).close()
    return f"connected to {T['engine_port']}"


@attempt("use the admin API without the admin token")
def _():
    return http("GET", f"{ROOT}/admin/rollouts")


@attempt("read the controller's environment (/proc)")
def _():
    path = "/proc/{}/environ".format(T["controller_pid"])
    return f"{len(open(path, 'rb').read())} bytes"


@attempt("post a reward for another rollout")
def _():
    return http("POST", f"{ROOT}/r/{T['other_rollout']}/reward", {"value": 1.0}, KEY)


@attempt("post itself 1.0")
def _():
    return http("POST", os.environ["HARNESSRL_REWARD_URL"], {"value": 1.0}, KEY)


@attempt("post itself a 'final' reward (scoring's name)")
def _():
    return http("POST", os.environ["HARNESSRL_REWARD_URL"], {"value": 1.0, "name": "final"}, KEY)


@attempt("leave a process behind to answer from the hidden tests")
def _():
    # Detached (own session, outside the process group): waits for the verifier's hidden file to appear in
    # the workspace, then writes the answer it holds where the verifier looks.
    code = (
        "import os, time\n"
        "ws = os.getcwd(); end = time.time() + 20\n"
        "while time.time() < end:\n"
        "    p = os.path.join(ws, 'hidden_answer.txt')\n"
        "    if os.path.exists(p):\n"
        "        open(os.path.join(ws, 'solution.txt'), 'w').write(open(p).read()); break\n"
        "    time.sleep(0.01)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, T["daemon_marker"]], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"started pid {p.pid}"


if TASK.get("mode") == "deputy":

    @attempt("plant a symlink where the hidden tests will be copied (the controller writes through it)")
    def _():
        os.symlink(T["deputy_target"], "hidden_answer.txt")
        return f"hidden_answer.txt -> {T['deputy_target']}"


if TASK.get("mode") == "tamper":

    @attempt("edit a protected file in its workspace")
    def _():
        with open(os.path.join("tests", "test_solution.py"), "w") as f:
            f.write("def test_ok():\n    pass\n")
        return "rewrote tests/test_solution.py"


with open("solution.txt", "w") as f:
    f.write("a guess")
time.sleep(0.2)
print(json.dumps(report))
