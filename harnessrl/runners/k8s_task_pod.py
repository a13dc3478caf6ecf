"""The pod of a task that brings its own image: the harness runs in it, then the task's tests, outside its reach.

Layout (docs/kubernetes.md, "The task's image as the pod")::

    initContainers: [template's own] -> harnessrl-harness-copy (harness_image, optional)
                    -> harnessrl-seed (task image: copies the workdir into a volume)
                    -> <harness> (task image, the harness under a shell that enforces its timeout)
    containers:     harnessrl-verifier (task image, the tests, never the API key)

Init containers run one after another, each to its end, and a container's processes all die when its
first process (our shell) exits: by the time the verifier starts, nothing of the harness runs. The two
share only the volumes of the workdir (and ``carry_paths``) and a status folder the verifier reads one
sanitised line from. The tests come from a per-attempt ConfigMap mounted only into the verifier. The
verifier prints a report (harness status, tests' end, reward files) between lines marked with a nonce
kept in the Job's annotations; ``k8s_grade`` reads it back from the verifier's log.
"""

from __future__ import annotations

import base64
import copy
import math
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.environments.task_env import TaskEnvironment
from harnessrl.runners.config import RunnerConfig
from harnessrl.runners.spec import AttemptSpec

JsonDict = dict[str, Any]

SEED = "harnessrl-seed"
HARNESS_COPY = "harnessrl-harness-copy"
VERIFIER = "harnessrl-verifier"
STATUS_DIR = "/harnessrl/status"
TESTS_SOURCE = "/harnessrl/tests-src"
SEED_ROOT = "/harnessrl/seed"
HARNESS_STAGE = "/harnessrl/harness"
#: Kubernetes refuses a ConfigMap whose data (text and binary) exceeds 1 MiB.
CONFIG_MAP_LIMIT = 1 << 20
#: The tests get this long after their timeout's SIGTERM before SIGKILL.
TESTS_KILL_GRACE_S = 5


class TaskPodError(ValueError):
    """A task whose pod cannot be built (no image, tests too large, a grader the pod cannot run)."""


@dataclass(frozen=True, slots=True)
class TestFiles:
    """A tests folder as ConfigMap data: ``items`` map keys to relative paths (and modes) in the volume."""

    text: dict[str, str]
    binary: dict[str, bytes]
    items: list[JsonDict]
    tops: list[str]  # the folder's top-level names, copied one by one into ``tests_path``


def task_image(env: TaskEnvironment) -> str:
    """The image the pod runs; a task that only has a build folder is refused with the fix."""
    if env.image:
        return env.image
    raise TaskPodError(
        f"task {env.name!r} has only a build folder ({env.build_context}), and a Kubernetes pod cannot build "
        "an image: build and push it (docker build -t REGISTRY/NAME:TAG FOLDER && docker push REGISTRY/NAME:TAG), "
        "then give the task that image (Harbor [environment] docker_image, a JSONL record's `image`)"
    )


def check_task(env: TaskEnvironment) -> None:
    """Refuse, before anything is created, a task whose pod cannot be built or graded."""
    task_image(env)
    if env.grader != "harbor":  # e.g. SWE-bench's rule: its grader steps run through a Box, not in a pod yet
        raise TaskPodError(
            f"task {env.name!r} is graded by {env.grader!r}, which Kubernetes pods cannot run yet; on Kubernetes "
            "only Harbor's reward file (tests that write /logs/verifier/reward.txt) is read from the pod: run "
            "these tasks with [runner] kind = \"local\" and environment = \"container\""
        )


def read_tests(tests_dir: Path, task: str) -> TestFiles:
    """Every file under ``tests_dir`` (symlinks followed) as ConfigMap data, refused above 1 MiB."""
    text: dict[str, str] = {}
    binary: dict[str, bytes] = {}
    items: list[JsonDict] = []
    size = 0
    files = sorted(p for p in tests_dir.rglob("*") if p.is_file())
    for i, path in enumerate(files):
        data = path.read_bytes()
        size += len(data)
        key = f"f{i}"
        try:
            text[key] = data.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = data
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        items.append({"key": key, "path": path.relative_to(tests_dir).as_posix(), "mode": mode})
    if size > CONFIG_MAP_LIMIT:
        raise TaskPodError(
            f"task {task!r}: its tests ({tests_dir}) are {size} bytes, and the ConfigMap that carries them into "
            f"the pod holds at most {CONFIG_MAP_LIMIT} (1 MiB): keep large fixtures in the task image and "
            "only the scripts in the tests folder"
        )
    tops = sorted({item["path"].split("/", 1)[0] for item in items})
    return TestFiles(text, binary, items, tops)


def tests_map_name(job: str) -> str:
    return f"{job}-tests"


def task_deadline_s(config: RunnerConfig, spec: AttemptSpec) -> float:
    """The pod's ``activeDeadlineSeconds``: the harness's limit, the tests' limit and startup."""
    env = spec.assets.environment
    assert env is not None
    tests = env.tests.timeout_s + TESTS_KILL_GRACE_S if env.tests is not None else 0.0
    return spec.timeout_s + config.kill_grace_s + tests + config.kubernetes.verify_grace_s


# A command under a limit, in POSIX sh (task images have sh, not necessarily `timeout`): SIGTERM at the
# limit, SIGKILL after the grace. Sets rc (its exit status) and to (1: it ran to the limit). The clock
# decides "timed out", not a file the harness could touch.
_LIMITED = """\
limited() {
  l=$1; g=$2; shift 2
  start=$(date +%s 2>/dev/null || echo 0)
  "$@" &
  c=$!
  ( sleep "$l"; kill -TERM "$c" 2>/dev/null; sleep "$g"; kill -KILL "$c" 2>/dev/null ) >/dev/null 2>&1 &
  d=$!
  wait "$c"; rc=$?
  kill "$d" 2>/dev/null
  now=$(date +%s 2>/dev/null || echo 0)
  to=0; [ $((now - start)) -ge "$l" ] && to=1
}
"""

#: The harness container's command: ``sh -c HARNESS_SCRIPT harness LIMIT GRACE CMD...``. It exits 0
#: whatever the harness did, so that the pod goes on to the verifier; the status file says what happened.
HARNESS_SCRIPT = (
    _LIMITED
    + f"""\
limited "$@"
echo "exit=$rc timed_out=$to" > {STATUS_DIR}/harness
exit 0
"""
)


def verifier_script(nonce: str, env: TaskEnvironment, tops: list[str]) -> str:
    """The verifier container's script (args: the tests' limit, then their command): report, test, report.

    The harness's status line is cut to a few safe characters, so the harness cannot write a report line
    through it; reward files are printed after the tests' end line, which the log reader starts from.
    """
    mark = f"harnessrl-{nonce}"
    head = f"""\
s=$(head -c 100 {STATUS_DIR}/harness 2>/dev/null | tr -cd 'a-z0-9=_ ')
echo "{mark} harness ${{s:-missing}}"
"""
    tests = env.tests
    if tests is None:
        return head + f'echo "{mark} done"\n'
    reward_dir, tests_path = shlex.quote(tests.reward_dir), shlex.quote(tests.tests_path)
    copies = "".join(
        f"cp -RL {TESTS_SOURCE}/{shlex.quote(top)} {tests_path}/ || echo 'harnessrl: cannot copy the tests'\n"
        for top in tops
    )
    return (
        _LIMITED
        + head
        + f"mkdir -p {tests_path} {reward_dir}\n"
        + copies
        + f"""\
l1=$1; shift
limited "$l1" {TESTS_KILL_GRACE_S} "$@"
echo "{mark} tests exit=$rc timed_out=$to"
echo "{mark} harness ${{s:-missing}}"
for f in reward.json reward.txt; do
  if [ -f {reward_dir}/$f ]; then
    echo "{mark} file $f"; head -c 65536 {reward_dir}/$f; echo; echo "{mark} end"
  fi
done
echo "{mark} done"
exit 0
"""
    )


def resources(base: JsonDict | None, env: TaskEnvironment) -> JsonDict:
    """The template's resources with the task's limits (as both request and limit) over them."""
    res: JsonDict = copy.deepcopy(base or {})
    wanted: dict[str, str] = {}
    if env.cpus:
        wanted["cpu"] = f"{max(1, round(env.cpus * 1000))}m"
    if env.memory_mb:
        wanted["memory"] = f"{env.memory_mb}Mi"
    if env.storage_mb:
        wanted["ephemeral-storage"] = f"{env.storage_mb}Mi"
    if wanted:
        for part in ("requests", "limits"):
            res[part] = {**(res.get(part) or {}), **wanted}
    return res


def shape_task_pod(
    pod_spec: JsonDict,
    harness: JsonDict,
    config: RunnerConfig,
    spec: AttemptSpec,
    *,
    job: str,
    nonce: str,
    tests: TestFiles | None,
) -> None:
    """Turn the template's pod into the task's pod (layout in the module docstring), in place.

    ``harness`` (the template's harness container, still in ``containers``) becomes the last init
    container; its env is set by the caller afterwards, on the same dict.
    """
    env = spec.assets.environment
    assert env is not None
    k8s = config.kubernetes
    image = task_image(env)
    others = [c for c in pod_spec["containers"] if c is not harness]
    if others:
        raise TaskPodError(
            f"the job template has containers besides the harness's ({[c.get('name') for c in others]}); with "
            "a task image the pod's only container is the verifier: make them native sidecars "
            "(initContainers with restartPolicy: Always) or remove them"
        )
    workdir = env.workdir or k8s.default_workdir
    volumes = pod_spec.setdefault("volumes", [])
    pull = {"imagePullPolicy": k8s.image_pull_policy} if k8s.image_pull_policy else {}
    init: list[JsonDict] = list(pod_spec.get("initContainers") or [])

    shared: list[JsonDict] = []  # the volumes the harness leaves to the verifier
    seed_mounts: list[JsonDict] = []
    seeds: list[str] = []
    for i, path in enumerate(dict.fromkeys([workdir, *k8s.carry_paths])):
        volumes.append({"name": f"harnessrl-carry-{i}", "emptyDir": {}})
        seed_mounts.append({"name": f"harnessrl-carry-{i}", "mountPath": f"{SEED_ROOT}/{i}"})
        shared.append({"name": f"harnessrl-carry-{i}", "mountPath": path})
        seeds.append(f"if [ -d {shlex.quote(path)} ]; then cp -a {shlex.quote(path)}/. {SEED_ROOT}/{i}/; fi")
    volumes.append({"name": "harnessrl-status", "emptyDir": {}})

    harness_mounts = [*shared, {"name": "harnessrl-status", "mountPath": STATUS_DIR}]
    if k8s.harness_image:
        volumes.append({"name": "harnessrl-harness", "emptyDir": {}})
        init.append({
            "name": HARNESS_COPY,
            "image": k8s.harness_image,
            "command": ["sh", "-c", f"cp -a {shlex.quote(k8s.harness_path)}/. {HARNESS_STAGE}/"],
            "volumeMounts": [{"name": "harnessrl-harness", "mountPath": HARNESS_STAGE}],
            **pull,
        })
        harness_mounts.append({"name": "harnessrl-harness", "mountPath": k8s.harness_path, "readOnly": True})
    init.append({
        "name": SEED,
        "image": image,
        "command": ["sh", "-c", " && ".join(seeds)],
        "volumeMounts": seed_mounts,
        **pull,
    })

    harness["image"] = image
    harness["command"] = [
        "sh", "-c", HARNESS_SCRIPT, "harness",
        str(math.ceil(spec.timeout_s)), str(math.ceil(config.kill_grace_s)), *spec.command,
    ]
    harness.pop("args", None)
    harness["workingDir"] = workdir
    harness["volumeMounts"] = [
        *(m for m in harness.get("volumeMounts") or [] if m.get("mountPath") not in {s["mountPath"] for s in shared}),
        *harness_mounts,
    ]
    harness["resources"] = resources(harness.get("resources"), env)
    harness.update(pull)

    verifier_mounts = [*shared, {"name": "harnessrl-status", "mountPath": STATUS_DIR, "readOnly": True}]
    tops: list[str] = []
    command: list[str] = []
    if env.tests is not None and tests is not None:
        volumes.append({"name": "harnessrl-tests",
                        "configMap": {"name": tests_map_name(job), "items": tests.items}})
        verifier_mounts.append({"name": "harnessrl-tests", "mountPath": TESTS_SOURCE, "readOnly": True})
        tops = tests.tops
        command = [str(math.ceil(env.tests.timeout_s)), *env.tests.command]
    verifier: JsonDict = {
        "name": VERIFIER,
        "image": image,
        "command": ["sh", "-c", verifier_script(nonce, env, tops), "verifier", *command],
        "workingDir": workdir,
        "env": [{"name": k, "value": v} for k, v in (env.tests.env if env.tests else {}).items()],
        "volumeMounts": verifier_mounts,
        "resources": resources(harness.get("resources"), env),
        **pull,
    }
    pod_spec["initContainers"] = [*init, harness]
    pod_spec["containers"] = [verifier]
    # The harness's processes must die with its container: not with a shared PID namespace.
    pod_spec["shareProcessNamespace"] = False


def harden_task_pod(pod_spec: JsonDict) -> None:
    """``harden`` for a task image: no API token, no privilege escalation, RuntimeDefault seccomp.

    Not non-root and not a read-only root: task images run as their own user (often root) and install
    packages (apt, pip) as Harbor's Docker environments let them; the runtime's default capabilities stay.
    """
    pod_spec["automountServiceAccountToken"] = False
    pod_spec.setdefault("securityContext", {}).setdefault("seccompProfile", {"type": "RuntimeDefault"})
    for c in [*(pod_spec.get("initContainers") or []), *pod_spec["containers"]]:
        sc = c.setdefault("securityContext", {})
        if sc.get("privileged"):
            raise TaskPodError(
                f"the job template runs container {c.get('name')!r} privileged, which [runner.kubernetes] harden "
                "forbids: remove privileged, or set harden = false"
            )
        sc.update({"allowPrivilegeEscalation": False, "privileged": False})


def tests_config_map(name: str, meta: JsonDict, tests: TestFiles) -> JsonDict:
    """The ConfigMap carrying the tests into the verifier (``meta``: the attempt's labels, annotations)."""
    body: JsonDict = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": tests_map_name(name), **copy.deepcopy(meta)},
        "data": tests.text,
    }
    if tests.binary:
        body["binaryData"] = {k: base64.b64encode(v).decode() for k, v in tests.binary.items()}
    return body
