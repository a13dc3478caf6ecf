"""Reading Harbor task folders: malformed ones fail naming the folder and the file; the Dockerfile's copies,
the container paths and the reward files are read as Harbor means them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_config import write_run_config

from harnessrl.config import load_config
from harnessrl.harbor.paths import relative_instruction, rewrite_paths
from harnessrl.harbor.task_dir import build_workspace, plan_environment, read_task_dir
from harnessrl.harbor.verify import RewardFileError, read_reward, resolve_env
from harnessrl.tasks import TaskLoadError, load_tasks
from harnessrl.types import TaskSplit

TEST_SH = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"


def make_task(root: Path, name: str = "t", *, instruction: str | None = "Do it in /app.",
              toml: str | None = "", dockerfile: str | None = "FROM ubuntu\nWORKDIR /app\n",
              test_sh: str | None = TEST_SH, files: dict[str, str] | None = None) -> Path:
    task = root / name
    task.mkdir(parents=True)
    for rel, text in {"instruction.md": instruction, "task.toml": toml, "environment/Dockerfile": dockerfile,
                      "tests/test.sh": test_sh, **(files or {})}.items():
        if text is not None:
            (task / rel).parent.mkdir(parents=True, exist_ok=True)
            (task / rel).write_text(text)
    return task


def load(tmp_path: Path, tasks: Path) -> None:
    config = load_config(write_run_config(tmp_path / "cfg", {"run": {"dir": str(tmp_path / "run")},
                                                             "tasks": {"train": str(tasks)}}))
    load_tasks(config, "r1")


@pytest.mark.parametrize(("broken", "says"), [
    ({"instruction": None}, "instruction.md is missing"),
    ({"instruction": "  \n"}, "instruction.md is empty"),
    ({"toml": None}, "task.toml is missing"),
    ({"toml": "[verifier\ntimeout_sec = 1"}, "task.toml is not valid TOML"),
    ({"toml": "[verifier]\ntimeout_sec = \"soon\""}, "task.toml: [verifier] timeout_sec: Input should be a valid number"),
    ({"toml": "[agent]\ntimeout_sec = -5"}, "task.toml: [agent] timeout_sec: Input should be greater than 0"),
    ({"test_sh": None}, "tests/test.sh is missing"),
    ({"dockerfile": "FROM x\nWORKDIR /app\nCOPY ../secret /app/\n"}, "is outside the build context"),
    ({"dockerfile": "FROM x\nWORKDIR /app\nCOPY missing.py /app/\n"}, "Dockerfile copies missing.py"),
])
def test_a_malformed_task_fails_naming_its_folder_and_file(tmp_path: Path, broken: dict, says: str) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "good")
    bad = make_task(tasks, "bad", **broken)
    with pytest.raises(TaskLoadError) as info:
        load(tmp_path, tasks)
    assert str(bad) in str(info.value) and says in str(info.value)


def test_a_folder_without_tasks_and_the_format_key(tmp_path: Path) -> None:
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    with pytest.raises(TaskLoadError, match="no Harbor task folders in it"):
        load(tmp_path, tmp_path / "empty")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"id": "a", "input": {}}\n')
    config = load_config(write_run_config(tmp_path / "cfg", {"tasks": {"train": str(jsonl), "format": "harbor"}}))
    with pytest.raises(TaskLoadError, match='format = "harbor" needs a folder'):
        load_tasks(config, "r1")


def test_one_task_folder_is_a_task_set_of_one_and_ids_stay_unique(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "only")
    config = load_config(write_run_config(tmp_path / "cfg", {"run": {"dir": str(tmp_path / "run")},
                                                             "tasks": {"train": str(task), "eval": str(task)}}))
    with pytest.raises(TaskLoadError, match="task id 'only' appears twice"):
        load_tasks(config, "r1")


def test_on_kubernetes_a_harbor_task_is_its_image_and_one_with_only_a_dockerfile_is_refused(tmp_path: Path) -> None:
    make_task(tmp_path / "built", toml='[environment]\ndocker_image = "registry.example/task:1"\ncpus = 2\n')
    config = load_config(write_run_config(tmp_path / "cfg", {"tasks": {"train": str(tmp_path / "built")},
                                                             "runner": {"kind": "kubernetes", "command": ["x"]}}))
    [loaded] = load_tasks(config, "r1")[TaskSplit.TRAIN]
    env = loaded.assets.environment
    assert env is not None and env.image == "registry.example/task:1" and env.cpus == 2
    assert env.tests is not None and env.tests.tests_dir.name == "tests" and loaded.assets.verifier is None
    assert loaded.task.input == {"instruction": "Do it in /app."}  # paths stay: the pod has /app
    make_task(tmp_path / "dockerfile")
    config = load_config(write_run_config(tmp_path / "cfg2", {"tasks": {"train": str(tmp_path / "dockerfile")},
                                                              "runner": {"kind": "kubernetes", "command": ["x"]}}))
    with pytest.raises(TaskLoadError, match="task 't'.*(build|push)"):
        load_tasks(config, "r1")


def test_the_dockerfile_copies_into_the_workdir_and_the_rest_is_reported(tmp_path: Path) -> None:
    dockerfile = """# a comment
FROM python:3.11 AS build
COPY nothing.py /app/
FROM python:3.11-slim
RUN apt-get update && \\
    apt-get install -y git
ENV X=1
WORKDIR /app
COPY --chown=1000 src/ /app/pkg/
COPY ["cfg.ini", "data.csv", "./conf/"]
ADD readme.txt notes.txt
COPY tool.sh /usr/local/bin/tool
COPY --from=build /x /app/x
COPY *.md /app/docs/
"""
    files = {f"environment/{k}": v for k, v in {"src/a.py": "a", "src/sub/b.py": "b", "cfg.ini": "c",
                                                "data.csv": "d", "readme.txt": "r", "tool.sh": "t",
                                                "one.md": "1", "two.md": "2"}.items()}
    task = read_task_dir(make_task(tmp_path, dockerfile=dockerfile, files=files))
    plan = task.environment
    assert plan.workdir == "/app"
    assert plan.skipped == ("FROM python:3.11 AS build", "FROM python:3.11-slim", "RUN", "ENV",
                            "COPY --from=build /x /app/x", "COPY to /usr/local/bin/tool (outside WORKDIR /app)")
    built = tmp_path / "ws"
    build_workspace(task, built)
    found = sorted(p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file())
    assert found == ["conf/cfg.ini", "conf/data.csv", "docs/one.md", "docs/two.md", "notes.txt", "pkg/a.py",
                     "pkg/sub/b.py"]
    assert plan.note().startswith("environment/Dockerfile not built; ran on the host; not carried out: FROM")


def test_no_dockerfile_or_a_prebuilt_image_is_said(tmp_path: Path) -> None:
    task = make_task(tmp_path, dockerfile=None, toml='[environment]\ndocker_image = "ghcr.io/x/y:1"\n')
    plan = plan_environment(task, read_task_dir(task).config)
    assert plan.workdir is None and plan.skipped == ("image ghcr.io/x/y:1 not pulled",)
    assert read_task_dir(task).config.environment.docker_image == "ghcr.io/x/y:1"


def test_container_paths_are_rewritten_only_as_whole_components() -> None:
    mapping = {"/app": "/w", "/logs/verifier": "/t/v", "/logs": "/t", "/tests": "/t/tests"}
    text = ('cd /app && pytest /tests/test_x.py > /logs/verifier/out.txt; cat "/app/a b"; ls /apple /app.py '
            "$HOME/app ~/app PATH=/app:/tests /logs; echo end of /app.")
    new, count = rewrite_paths(text, mapping)
    assert new == ('cd /w && pytest /t/tests/test_x.py > /t/v/out.txt; cat "/w/a b"; ls /apple /app.py '
                   "$HOME/app ~/app PATH=/w:/t/tests /t; echo end of /w.")
    assert count == 8
    assert relative_instruction("Edit /app/main.py, then run it in /app.", "/app") == (
        "Edit ./main.py, then run it in ..", 2)
    assert relative_instruction("Use /app/x", None) == ("Use /app/x", 0)


def test_rewards_are_read_as_harbor_reads_them(tmp_path: Path) -> None:
    def reward(**files: str) -> tuple[float, dict[str, float]]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        for name, text in files.items():
            (folder / name.replace("_", ".")).write_text(text)
        return read_reward(folder)

    assert reward(reward_txt="0.5\n") == (0.5, {})
    assert reward(reward_json=json.dumps({"reward": 1, "tests": 3, "ok": True})) == (1.0, {"reward": 1.0,
                                                                                         "tests": 3.0})
    assert reward(reward_json='{"score": 0.25}') == (0.25, {"score": 0.25})
    assert reward(reward_json='{"a": 1, "b": 0}', reward_txt="0.75") == (0.75, {"a": 1.0, "b": 0.0})
    for files, says in (({}, "wrote no reward"), ({"reward_txt": "yes"}, "is not a number"),
                        ({"reward_txt": "nan"}, "finite"), ({"reward_json": "[1]"}, "must be an object"),
                        ({"reward_json": '{"a": 1, "b": 0}'}, 'has no "reward" key')):
        with pytest.raises(RewardFileError, match=says):
            reward(**files)


def test_task_env_templates_resolve_from_the_verifiers_environment() -> None:
    env = {"TOKEN": "t0"}
    assert resolve_env({"A": "${TOKEN}", "B": "${MISSING:-dflt}", "C": "x${MISSING}y"}, env) == {
        "A": "t0", "B": "dflt", "C": "xy"}
