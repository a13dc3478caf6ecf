"""Supervised training from the store: ``harnessrl sft`` (``run``), rollout selection (``select``),
its section (``config``), and rejection-sampling fine-tuning's filter (``[run] mode = "rft"``). docs/sft.md."""
