"""``RunnerConfig``: where and how attempts run (the ``[runner]`` section of the TOML config).

Kept apart from the code that reads it so that the config file documents the design: every knob the
runner has is here, with a default that works on a laptop. There are no hidden caps elsewhere.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harnessrl.config_base import ConfigSection
from harnessrl.environments.config import ContainerConfig

#: Variables copied from the controller's environment into every attempt. Nothing else is inherited, so
#: the user's own ``OPENAI_API_KEY`` (or any other secret) can never reach a harness by accident.
DEFAULT_INHERIT_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "HF_HOME",
    "HF_HUB_OFFLINE",
)

#: Defaults that keep common harnesses offline and their logs useful (see DESIGN.md, "real harnesses").
DEFAULT_ATTEMPT_ENV: dict[str, str] = {
    "PYTHONUNBUFFERED": "1",  # a killed harness still leaves its last lines in the captured tail
    "OPENAI_AGENTS_DISABLE_TRACING": "1",  # openai-agents posts traces to the internet otherwise
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches a cost map from the internet at import
}


#: Why a verifier command cannot score a Kubernetes attempt, and what to do instead (said at start).
NO_LOCAL_VERIFIER_ON_KUBERNETES = (
    "a verifier command runs on the controller's machine in the attempt's workspace, and with [runner] "
    "kind = \"kubernetes\" that workspace stays in the pod, so every attempt would end as an infra "
    "failure. Give the task an 'image' and 'tests' (a folder whose test.sh writes /logs/verifier/reward.txt): "
    "they run in the pod after the harness, outside its reach (docs/kubernetes.md, \"The task's image as the "
    "pod\"); or score by exit code ([rewards] exit_code_map) or the harness's posts (\"Rewards on Kubernetes\")"
)


class KubernetesConfig(ConfigSection):
    """The ``[runner.kubernetes]`` section: how attempts become ``batch/v1`` Jobs (see docs/kubernetes.md).

    The Job template is the user's (image, resources, volumes, service account, node selectors);
    harnessrl only adds identity (name, labels, env), ``restartPolicy: Never``, ``backoffLimit: 0``,
    ``activeDeadlineSeconds`` (from ``timeout_s``) and ``ttlSecondsAfterFinished``.
    """

    namespace: str = Field("default", description="Namespace the Jobs (and their Secrets) are created in.")
    job_template: str | None = Field(
        None, description="Inline YAML of a batch/v1 Job used as the template for every attempt."
    )
    job_template_file: str | None = Field(
        None, description="Path of a YAML file holding the Job template (instead of `job_template`)."
    )
    image: str = Field(
        "python:3.11-slim",
        description="Image of the harness container when no template is given (a one-container Job).",
    )
    container: str | None = Field(
        None, description="Name of the template's container that runs the harness (default: the first)."
    )
    set_command: bool = Field(
        True,
        description="Set that container's command to `runner.command`; false keeps the template's "
        "command/args (e.g. the image's entrypoint).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        None, description="Overrides the harness container's imagePullPolicy when set."
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Secret names added to the pod's imagePullSecrets."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Extra labels on every Job and its pods (harnessrl's own win)."
    )
    auth: Literal["auto", "kubeconfig", "in_cluster"] = Field(
        "auto",
        description="`auto`: in-cluster service account when running in a pod, else the kubeconfig.",
    )
    kubeconfig: str | None = Field(None, description="Kubeconfig path (default: $KUBECONFIG or ~/.kube/config).")
    context: str | None = Field(None, description="Kubeconfig context (default: the current one).")
    api_server: str | None = Field(
        None,
        description="Talk to this URL without credentials instead (e.g. `kubectl proxy` at "
        "http://127.0.0.1:8001).",
    )
    api_key_secret: bool = Field(
        True,
        description="Put the rollout's API key in a per-attempt Secret referenced by the pod (true), "
        "or inline in the Job's env, readable by anyone who can read Jobs (false).",
    )
    secret_env: list[str] = Field(
        default_factory=lambda: ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"],
        description="Rollout variables that go into the Secret when `api_key_secret` is true.",
    )
    ttl_seconds_after_finished: int = Field(
        3600,
        ge=0,
        description="Kubernetes deletes a finished Job (and its pods) this long after it ends; long "
        "enough for a restarted controller to re-attach and read its logs.",
    )
    keep_jobs: Literal["all", "failed", "none"] = Field(
        "failed",
        description="Which finished Jobs `Runner.release` leaves for the TTL to remove (for debugging); "
        "the others are deleted at once. The API-key Secret is always deleted.",
    )
    network_policy: bool = Field(
        True,
        description="Create a NetworkPolicy with each Job: no ingress, egress only to the gateway's port "
        "(at `gateway_peers`) and DNS. Needs a CNI that enforces NetworkPolicy, and RBAC on networkpolicies.",
    )
    gateway_peers: list[dict[str, Any]] = Field(
        default_factory=list,
        description="NetworkPolicy peers of the gateway, e.g. [{podSelector = {matchLabels = {app = "
        "'harnessrl-gateway'}}}]. Default: an ipBlock of the gateway URL's host when it is an IP address; "
        "for a host name, any address on the gateway's port (set this to narrow it to the gateway).",
    )
    dns_peers: list[dict[str, Any]] = Field(
        default_factory=lambda: [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }],
        description="NetworkPolicy peers allowed for DNS (port 53); [] allows no DNS.",
    )
    harden: bool = Field(
        True,
        description="Every container non-root (uid 65532 unless the template sets one), read-only root "
        "filesystem, no capabilities, no privilege escalation, RuntimeDefault seccomp; the pod gets no "
        "service-account token. `writable_paths` become emptyDir volumes.",
    )
    writable_paths: list[str] = Field(
        default_factory=lambda: ["/tmp"],
        description="Paths mounted as emptyDir volumes in the harness container (the root filesystem is "
        "read-only when `harden`), unless the template already mounts something there.",
    )
    creations_per_s: float = Field(5.0, gt=0, description="Job creations per second (token bucket).")
    creation_burst: int = Field(10, ge=1, description="Job creations allowed at once before the rate applies.")
    api_timeout_s: float = Field(30.0, gt=0, description="Timeout of one Kubernetes API request.")
    api_retries: int = Field(
        3, ge=0, description="Retries of an API request after a 429/5xx or connection error (then infra)."
    )
    api_retry_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles each retry.")
    watch_timeout_s: int = Field(
        300, ge=1, description="Server-side length of one watch request; it is then resumed."
    )
    deadline_grace_s: float = Field(
        60.0,
        ge=0,
        description="If no terminal Job status arrives this long after `timeout_s`, the Job is read "
        "once, then deleted and the attempt failed as infra (a safety net, not polling).",
    )
    log_tail_lines: int = Field(
        5000, ge=1, description="Lines of pod log fetched at the end (then cut to `max_log_bytes`)."
    )
    # ---- a task with its own environment (docs/kubernetes.md, "The task's image as the pod") ----
    harness_image: str | None = Field(
        None,
        description="For tasks with their own image: an image holding the harness under `harness_path`, "
        "copied by an init container into a volume mounted read-only at the same path in the harness "
        "container (the task image runs the harness). None: the task image already has the harness.",
    )
    harness_path: str = Field(
        "/opt/harness",
        description="Where the harness lives in `harness_image` and in the harness container; give "
        "`runner.command` as an absolute path under it.",
    )
    default_workdir: str = Field(
        "/app",
        description="The workspace of a task whose environment names no `workdir` (the image's WORKDIR cannot "
        "be read before the pod runs): seeded from the image, shared by the harness and the verifier.",
    )
    carry_paths: list[str] = Field(
        default_factory=list,
        description="More paths of the task image (besides the workdir) seeded into volumes the harness "
        "writes and the verifier then sees, e.g. a virtualenv the agent installs into. Everything else the "
        "harness changes is gone when its container ends.",
    )
    verify_grace_s: float = Field(
        120.0,
        ge=0,
        description="Added to the harness's and the tests' timeouts for the pod's activeDeadlineSeconds: "
        "image pulls, seeding the workspace and starting containers count against it.",
    )


class RunnerConfig(ConfigSection):
    """How attempts are launched, bounded and observed."""

    kind: Literal["local", "kubernetes"] = Field(
        "local",
        description="`local`: one subprocess per attempt on this machine. `kubernetes`: one Job each.",
    )
    command: list[str] = Field(
        default_factory=lambda: ["python", "agent.py"],
        description="The harness command, run unmodified in the attempt's working directory (its cwd). "
        "Relative paths in it are relative to that directory, so give absolute paths for scripts that "
        "live outside the task workspace.",
        min_length=1,
    )
    concurrency: int = Field(4, ge=1, description="Attempts running at the same time (the only cap).")
    timeout_s: float = Field(
        600.0, gt=0, description="Wall-clock limit per attempt, counted from process start (not queueing)."
    )
    kill_grace_s: float = Field(
        5.0, ge=0, description="After SIGTERM to the attempt's process group, wait this long, then SIGKILL."
    )
    max_log_bytes: int = Field(
        65536,
        ge=0,
        description="Bytes of stdout and of stderr kept per attempt (the tail; the rest is counted).",
    )
    workdir_root: str = Field(
        "attempts",
        description="Where attempt directories are created; relative paths are relative to the run directory.",
    )
    keep_workdirs: Literal["all", "failed", "none"] = Field(
        "failed", description="Which attempt directories survive `Runner.release` (after scoring)."
    )
    env: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_ATTEMPT_ENV),
        description="Extra environment for every attempt. Rollout identity variables (OPENAI_*, "
        "ANTHROPIC_*, HARNESSRL_*) always win over these.",
    )
    inherit_env: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INHERIT_ENV),
        description="Names copied from the controller's environment when set; nothing else is inherited.",
    )
    prepend_python_bin: bool = Field(
        True,
        description="Put the directory of the running Python (the venv's bin) first on PATH, so that "
        "`python` in the command is the interpreter harnessrl runs in.",
    )
    task_input_env: bool = Field(
        True,
        description="Pass the task input as HARNESSRL_TASK_INPUT (JSON) and HARNESSRL_TASK_<KEY> variables.",
    )
    task_input_file: bool = Field(
        True,
        description="Write the task input to a JSON file outside the workspace; path in HARNESSRL_TASK_INPUT_FILE.",
    )
    max_env_value_bytes: int = Field(
        32768,
        ge=0,
        description="Task input values longer than this are left out of the environment (the kernel refuses "
        "exec with huge variables); the JSON file always has them.",
    )
    sandbox: Literal["auto", "bubblewrap", "none"] = Field(
        "auto",
        description="Local attempts and verifiers in a bubblewrap sandbox: their workspace read-write, the "
        "system read-only, private /tmp, no network but the gateway, no view of the store, run directory, "
        "other attempts or hidden files (docs/security.md). `auto`: bubblewrap when `bwrap` is installed "
        "and works here, else none with a warning; `bubblewrap`: refuse to start without it.",
    )
    sandbox_read_only: list[str] = Field(
        default_factory=list,
        description="More paths a sandboxed attempt may read (e.g. a tool installed under /opt); the venv, "
        "harnessrl and the folders of the command's absolute file arguments are always readable.",
    )
    kubernetes: KubernetesConfig = Field(
        default_factory=KubernetesConfig, description='Settings of `kind = "kubernetes"`.'
    )
    environment: Literal["host", "container"] = Field(
        "host",
        description="`host`: local attempts run on this machine (in the bubblewrap sandbox). `container`: each "
        "attempt runs in its task's image (Harbor Dockerfile or docker_image, JSONL `image`, SWE-bench "
        "instance image, else `[runner.container] default_image`) under Podman or Docker, and is graded there "
        "(docs/containers.md). On Kubernetes the task's image is always the pod's.",
    )
    container: ContainerConfig = Field(
        default_factory=ContainerConfig, description='Settings of `environment = "container"`.'
    )
