#!/usr/bin/env bash
# The harness command of the swe example: mini-swe-agent, installed from PyPI and run unmodified through
# its own CLI and its own default config (mini.yaml). harnessrl starts this script in a fresh copy of the
# task's repository with the rollout's identity in the environment; only standard settings connect the two:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route and key (read by litellm's openai provider)
#   HARNESSRL_TASK_ISSUE              the task's issue text (the task input's "issue" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one
# Settings of this example (set them in [runner] env): SWE_STEP_LIMIT (model calls per attempt, default 4;
# mini's own default is unlimited), SWE_MINI_CONFIG (mini's config file, default its mini.yaml) and
# SWE_MINI_ARGS (extra `mini` arguments). Text-mode actions instead of its bash tool:
# SWE_MINI_CONFIG=mini_textbased.yaml SWE_MINI_ARGS="--model-class litellm_textbased".
set -euo pipefail

: "${HARNESSRL_TASK_ISSUE:?the task input needs an \"issue\" key (the issue text)}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"

export MSWEA_CONFIGURED=true                 # skip the interactive first-run setup
export MSWEA_COST_TRACKING=ignore_errors     # a local policy has no price in litellm's cost map
export MSWEA_SILENT_STARTUP=1
export LITELLM_LOCAL_MODEL_COST_MAP=True     # litellm would fetch its cost map from the internet at import
export MSWEA_GLOBAL_CONFIG_DIR="$PWD/.mswea" # not the user's ~/.config/mini-swe-agent/.env
mkdir -p "$MSWEA_GLOBAL_CONFIG_DIR"

# -y: no confirmation before commands; --exit-immediately: no prompt when the agent submits; stdin closed
# so that nothing can wait for a human. `-c mini.yaml` is mini's default config, named explicitly only so
# that one key (the step limit) can be set on top of it (mini drops its default when any -c is given).
# shellcheck disable=SC2086
exec mini -m "openai/${HARNESSRL_MODEL:-policy}" -t "$HARNESSRL_TASK_ISSUE" -y --exit-immediately \
    -c "${SWE_MINI_CONFIG:-mini.yaml}" -c "agent.step_limit=${SWE_STEP_LIMIT:-4}" -o traj.json ${SWE_MINI_ARGS:-} </dev/null
