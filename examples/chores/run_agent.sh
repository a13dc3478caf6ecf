#!/usr/bin/env bash
# The harness command of the chores example: mini-swe-agent from PyPI, unmodified, with this example's
# config (mini.yaml, beside this script). harnessrl starts it in a fresh copy of repo/ with the rollout's
# gateway route in OPENAI_BASE_URL/OPENAI_API_KEY and the issue in HARNESSRL_TASK_ISSUE.
set -euo pipefail
: "${HARNESSRL_TASK_ISSUE:?the task input needs an \"issue\" key (the issue text)}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
export MSWEA_CONFIGURED=true MSWEA_COST_TRACKING=ignore_errors MSWEA_SILENT_STARTUP=1
export LITELLM_LOCAL_MODEL_COST_MAP=True       # litellm would fetch its cost map from the internet
export MSWEA_GLOBAL_CONFIG_DIR="$PWD/.mswea"   # not the user's ~/.config/mini-swe-agent/.env
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec mini -m "openai/${HARNESSRL_MODEL:-policy}" -t "$HARNESSRL_TASK_ISSUE" -y --exit-immediately \
    -c "$here/mini.yaml" -o "$MSWEA_GLOBAL_CONFIG_DIR/traj.json" </dev/null
