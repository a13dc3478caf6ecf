#!/usr/bin/env bash
# The harness command of the harbor example: mini-swe-agent (PyPI `mini-swe-agent`, unmodified) given the
# Harbor task's instruction. harnessrl starts it in a fresh copy of the task's workspace (what the task's
# Dockerfile copies into its WORKDIR) with the rollout's identity in the environment:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route and key (read by litellm's openai provider)
#   HARNESSRL_TASK_INSTRUCTION        the task's instruction.md (paths under its WORKDIR made relative)
#   HARNESSRL_MODEL                   the served model name, if the controller set one
# SWE_STEP_LIMIT (model calls per attempt, default 4) is set in [runner] env, as in examples/swe.
set -euo pipefail

: "${HARNESSRL_TASK_INSTRUCTION:?run me on Harbor tasks through harnessrl (the task input's \"instruction\")}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"

export MSWEA_CONFIGURED=true                 # skip the interactive first-run setup
export MSWEA_COST_TRACKING=ignore_errors     # a local policy has no price in litellm's cost map
export MSWEA_SILENT_STARTUP=1
export LITELLM_LOCAL_MODEL_COST_MAP=True     # litellm would fetch its cost map from the internet at import
export MSWEA_GLOBAL_CONFIG_DIR="$PWD/.mswea" # not the user's ~/.config/mini-swe-agent/.env
mkdir -p "$MSWEA_GLOBAL_CONFIG_DIR"

exec mini -m "openai/${HARNESSRL_MODEL:-policy}" -t "$HARNESSRL_TASK_INSTRUCTION" -y --exit-immediately \
    -c mini.yaml -c "agent.step_limit=${SWE_STEP_LIMIT:-4}" -o .mswea/traj.json </dev/null
