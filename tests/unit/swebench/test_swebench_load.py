"""SWE-bench rows as tasks: realistic rows (tests/fixtures/swebench_instances.jsonl: astropy as the published
dataset has it, django with swebench 5.x's own eval script, sympy as a copy with lists), and bad rows.

No __init__.py in this folder: a package named ``swebench`` on pytest's path would shadow the library.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.swebench.load import SwebenchRecordError, instance_image, load_swebench_tasks, swebench_task

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "swebench_instances.jsonl"


def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_realistic_rows_become_tasks():
    astropy, django, sympy = load_swebench_tasks(FIXTURE)
    assert [t.id for t in (astropy, django, sympy)] == [
        "astropy__astropy-12907", "django__django-11099", "sympy__sympy-20590"]
    # the harness gets the issue only; the rest is the grader's
    assert astropy.input == {"instruction": rows()[0]["problem_statement"]}
    env = astropy.environment
    assert (env.name, env.workdir, env.grader, env.build_context) == (
        "astropy__astropy-12907", "/testbed", "swebench", None)
    # swebench's own name for the published image (Docker Hub forbids "__")
    assert env.image == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    g = env.grader_input
    assert g["FAIL_TO_PASS"] == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]",
                                 "astropy/modeling/tests/test_separable.py::test_separable[compound_model9-result9]"]
    assert len(g["PASS_TO_PASS"]) == 6
    assert (g["log_parser"], g["eval_type"], g["version"]) == ("parse_log_pytest", "pass_and_fail", "4.3")
    # no eval_script in the row: the classic one, pytest on the test patch's file
    assert "pytest -rA astropy/modeling/tests/test_separable.py\n" in g["eval_script"]
    assert "git checkout d16bfe05a744909de4b27f5875fe0d4ed41ce607 -- astropy/modeling/tests/test_separable.py" \
        in g["eval_script"]
    assert "patch" not in g and "hints_text" not in g  # the gold patch never reaches the container


def test_a_5x_row_keeps_its_own_image_eval_script_and_parser():
    django = load_swebench_tasks(FIXTURE)[1]
    g = django.environment.grader_input
    assert django.environment.image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert g["eval_script"] == rows()[1]["eval_script"]
    assert g["log_parser"] == "parse_log_django"


def test_lists_and_numbers_of_copies_are_read():
    sympy = load_swebench_tasks(FIXTURE)[2]
    g = sympy.environment.grader_input
    assert g["FAIL_TO_PASS"] == ["sympy/core/tests/test_basic.py::test_immutable"]
    assert g["version"] == "1.7"


def test_local_image_names_and_image_name_field():
    assert instance_image("astropy__astropy-12907", None) == "sweb.eval.x86_64.astropy__astropy-12907:latest"
    assert instance_image("astropy__astropy-12907", None, "arm64") == "sweb.eval.arm64.astropy__astropy-12907:latest"
    row = {**rows()[0], "image_name": "registry.example/astropy-12907:v1"}
    assert swebench_task(row, where="x").environment.image == "registry.example/astropy-12907:v1"


def test_fail_only_repos_are_graded_fail_only():
    row = {**rows()[0], "repo": "markedjs/marked"}
    assert swebench_task(row, where="x").environment.grader_input["eval_type"] == "fail_only"


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"problem_statement": ""}, "needs problem_statement"),
    ({"test_patch": None, "base_commit": None}, "needs base_commit, test_patch"),
    ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS is a string but not a JSON list"),
    ({"PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS must be a list of test ids"),
    ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS is empty"),
    ({"instance_id": 12907}, "instance_id must be a string"),
    ({"log_parser": "parse_log_nose"}, "log_parser 'parse_log_nose' is not one of swebench's"),
    ({"eval_type": "pass_only"}, "eval_type 'pass_only' is not one of"),
    ({"eval_script": "#!/bin/bash\n", "test_cmd": "pytest"}, "give eval_script or test_cmd, not both"),
    ({"test_patch": "not a diff"}, "test_patch names no file"),
    ({"image_assets": '{"test_patch": [{"path": "a.png", "url": "https://x"}]}'}, "image_assets"),
    ({"version": True}, "version must be a string"),
])
def test_a_bad_row_names_its_line(tmp_path, change, message):
    good = json.dumps(rows()[2])
    bad = json.dumps({**rows()[0], **change})
    path = _write(tmp_path, [good, "", bad])
    with pytest.raises(SwebenchRecordError, match=rf"instances\.jsonl:3: .*{message}"):
        load_swebench_tasks(path)


def test_not_json_not_an_object_duplicate_and_missing_file(tmp_path):
    good = json.dumps(rows()[0])
    with pytest.raises(SwebenchRecordError, match=r"instances\.jsonl:2: not valid JSON"):
        load_swebench_tasks(_write(tmp_path, [good, "{"]))
    with pytest.raises(SwebenchRecordError, match=r"instances\.jsonl:1: each line must be a JSON object"):
        load_swebench_tasks(_write(tmp_path, ["[1]"]))
    with pytest.raises(SwebenchRecordError, match=r"instances\.jsonl:2: instance_id 'astropy__astropy-12907' "
                                                  r"appears twice \(first at .*instances\.jsonl:1\)"):
        load_swebench_tasks(_write(tmp_path, [good, good]))
    with pytest.raises(SwebenchRecordError, match="SWE-bench file not found"):
        load_swebench_tasks(tmp_path / "nope.jsonl")
