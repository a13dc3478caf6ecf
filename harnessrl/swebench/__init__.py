"""SWE-bench instances as tasks: each runs in its instance image and is graded by the official ``swebench``
package's rule (reward 1 iff resolved).

``load.py`` reads SWE-bench rows into tasks (input: the problem statement; environment: the instance
image at ``/testbed``, grader ``"swebench"``); ``eval_script.py`` writes the eval script of a row that
brings none; ``grade.py`` runs it in the attempt's container and decides with swebench's own log parsers
and resolution rule. docs/swebench.md. swebench is imported only when a task is loaded or graded (the
``swebench`` extra).
"""

from harnessrl.swebench.grade import grade_swebench
from harnessrl.swebench.load import SwebenchRecordError, SwebenchTask, load_swebench_tasks, swebench_task

__all__ = ["SwebenchRecordError", "SwebenchTask", "grade_swebench", "load_swebench_tasks", "swebench_task"]
