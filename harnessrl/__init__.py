"""harnessrl: reinforcement learning for LLM agents inside the harness they already run in."""

from harnessrl.cpu_threads import sleep_while_waiting

sleep_while_waiting()  # before anything imports torch: its OpenMP pool reads the policy once
