#!/usr/bin/env bash
# The harness command of this example: the OpenHands SDK agent (PyPI openhands-sdk + openhands-tools,
# installed by scripts/openhands.sh into .venv-openhands, run unmodified) on the task's prompt, through
# agent.py, the few lines of glue any SDK user writes. harnessrl starts this script in a fresh copy of the
# task's repository; the connection is the SDK's LLM settings, read by agent.py from:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
venv="${OPENHANDS_VENV:-$here/../../.venv-openhands}"
[ -x "$venv/bin/python" ] || { echo "no OpenHands venv at $venv: run scripts/openhands.sh (or set OPENHANDS_VENV)" >&2; exit 127; }

# Offline: LiteLLM's bundled model cost map instead of fetching it at import; and no start-up banner.
export LITELLM_LOCAL_MODEL_COST_MAP=True OPENHANDS_SUPPRESS_BANNER=1
# Each attempt starts from a fresh OpenHands state (~/.openhands: conversations, caches), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

"$venv/bin/python" "$here/agent.py" </dev/null
