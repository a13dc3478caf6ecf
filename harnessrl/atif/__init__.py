"""ATIF, Harbor's Agent Trajectory Interchange Format: rollouts out as trajectories, trajectories in as rollouts.

``schema.py`` is the format (pydantic models of the RFC's tables), ``write.py`` the export (one JSON file per
rollout, exact token IDs and logprobs in each step's metrics), ``read.py`` the import (token IDs kept where
present, otherwise re-tokenized with the policy's template and marked). docs/trajectory-format.md maps the
fields.
"""
