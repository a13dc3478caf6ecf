"""``harnessrl eval``: a checkpoint x harness matrix on a task set (docs/eval.md).

``config.py`` the ``[eval]`` and ``[harnesses.<name>]`` sections; ``estimators.py`` pass@k and the bootstrap;
``figures.py`` one cell's figures from its attempts; ``plan.py`` what is left to run (resume) and what
changed; ``report.py`` the table, Markdown and plot. The driver is ``harnessrl/drivers/eval.py``.
"""
