"""harnessrl: reinforcement learning for LLM agents inside the harness they already run in."""

from harnessrl.cpu_threads import sleep_while_waiting
from harnessrl.kernel_caches import bound_kernel_caches

sleep_while_waiting()  # before anything imports torch: its OpenMP pool reads the policy once
bound_kernel_caches()  # and oneDNN its cache capacities
