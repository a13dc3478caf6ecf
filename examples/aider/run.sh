#!/usr/bin/env bash
# The harness command of this example: aider (PyPI aider-chat, installed by scripts/aider.sh into .venv-aider,
# run unmodified) on the task's prompt in one-shot mode (`aider --message`). harnessrl starts this script in
# a fresh copy of the task's repository; the connection is aider's documented OpenAI-compatible setting:
#   OPENAI_API_BASE / OPENAI_API_KEY  the rollout's gateway route (harnessrl's OPENAI_BASE_URL, …/v1) and key
#   --model openai/<name>             `openai/`: an OpenAI-compatible server (LiteLLM underneath; any name works)
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one
# Everything else is aider's default: its prompts, edit format, repository map, auto-commits.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
venv="${AIDER_VENV:-$here/../../.venv-aider}"
[ -x "$venv/bin/aider" ] || { echo "no aider at $venv: run scripts/aider.sh (or set AIDER_VENV)" >&2; exit 127; }

export OPENAI_API_BASE="$OPENAI_BASE_URL"
# Offline: LiteLLM's bundled model cost map instead of fetching it from raw.githubusercontent.com at import.
export LITELLM_LOCAL_MODEL_COST_MAP=True
model="openai/${HARNESSRL_MODEL:-policy}"
# Each attempt starts from a fresh aider state (~/.aider: analytics id, caches), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT
# The model's context window, in aider's model metadata file: without it aider fetches LiteLLM's model list
# from raw.githubusercontent.com to look the name up, and warns that it does not know the model.
cat > "$HOME/.aider.model.metadata.json" <<JSON
{"$model": {"max_input_tokens": ${AIDER_CONTEXT_WINDOW:-32768}, "max_output_tokens": 4096, "litellm_provider": "openai",
  "mode": "chat", "input_cost_per_token": 0, "output_cost_per_token": 0}}
JSON

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --yes-always: headless, nobody answers its questions (add a mentioned file, fix failing tests); it still
# declines shell commands the model suggests (they need an explicit yes), so the tests run through
# --auto-test and --test-cmd, aider's own way: failures go back to the model. Offline: no update check and
# no analytics; --no-gitignore: it would add .aider* to the repository's .gitignore.
export AIDER_TEST_CMD="${AIDER_TEST_CMD:-python3 -m unittest}"
"$venv/bin/aider" --model "$model" --message "$HARNESSRL_TASK_PROMPT" --yes-always --auto-test \
  --no-check-update --analytics-disable --no-show-release-notes --no-gitignore </dev/null
