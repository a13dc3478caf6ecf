"""Where an attempt runs when its task brings its own environment: the task's container image.

``task_env.py`` says what a task asks for (image or Dockerfile, limits, how it is graded); ``engine.py``
speaks to Podman or Docker (their shared CLI); ``images.py`` builds and caches task images; ``container.py``
is one attempt's container (harness inside, gateway the only network); ``reward_file.py`` reads Harbor's
reward file. Grading in a container (the same one or a clean one) is ``harnessrl.rewards.container_grading``. The local runner for containers is ``harnessrl.runners.container``; Kubernetes uses the same
``TaskEnvironment`` for its pod (``harnessrl.runners.k8s_manifest``). docs/containers.md.
"""

from harnessrl.environments.task_env import ContainerTests, TaskEnvironment

__all__ = ["ContainerTests", "TaskEnvironment"]
