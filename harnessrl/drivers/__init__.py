"""The drivers: one run from its start to its end, above the stack and the loop (docs/architecture.md §0).

``lifecycle.py`` is the prologue and end every driver shares; ``rl.py`` drives ``harnessrl train`` and
``collect`` (and picks the batch builder by ``[run] mode``); ``sft.py`` trains on recorded rollouts;
``production.py`` trains off-policy from a deployment's sessions. Only the commands (``entrypoints/``)
import a driver.
"""
