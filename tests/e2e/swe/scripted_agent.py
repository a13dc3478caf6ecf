"""A scripted stand-in for the coding agent, to check the swe tasks' reward path without a model.

``mode`` (task input): ``fix`` copies the reference solution in (reward 1), ``tamper`` also rewrites a
visible test file (reward 0, recorded as tampering), ``hidden`` writes its own copy of the hidden test
file name before the real one arrives (an added protected file: tampering too), ``nothing`` does nothing.
"""

import json
import os
import shutil
from pathlib import Path

task = json.loads(os.environ["HARNESSRL_TASK_INPUT"])
mode = task["mode"]
if mode in ("fix", "tamper", "hidden"):
    for f in Path(task["solution"]).iterdir():
        shutil.copy(f, f.name)
if mode == "tamper":
    test = next(Path("tests").glob("test_*.py"))
    test.write_text("import unittest\n")
if mode == "hidden":
    Path("tests", "test_hidden_slugify.py").write_text("import unittest\n")
