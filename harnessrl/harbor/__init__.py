"""Harbor task folders (the terminal-bench format) as harnessrl tasks: docs/harbor.md.

A Harbor task is a folder: ``instruction.md`` (what the agent is asked), ``task.toml`` (timeouts, metadata),
``environment/`` (a Dockerfile), ``tests/test.sh`` (writes the reward to ``/logs/verifier/reward.txt`` or
``reward.json``) and ``solution/solve.sh`` (the reference). In containers (``[runner] environment =
"container"``, Kubernetes) a task is its image and its tests (``load.task_environment``; docs/containers.md).
On the host (the default) harnessrl builds no container: the
Dockerfile's ``WORKDIR`` and the files it copies there become the attempt's workspace, the harness runs on
the host (in the bubblewrap sandbox where there is one), and ``tests/test.sh`` runs afterwards as the task's
verifier with Harbor's container paths mapped to the attempt's own folders (``paths.py``).

``task_dir.py`` reads one folder, ``load.py`` turns a set of them into tasks, ``verify.py`` is the verifier
command and ``oracle.py`` a harness that runs a task's own ``solution/solve.sh`` (to check a task set).
"""
