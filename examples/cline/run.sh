#!/usr/bin/env bash
# The harness command of this example: the Cline CLI (npm cline, installed by scripts/clis.sh, run unmodified)
# on the task's prompt in headless mode (`cline "$PROMPT"`: act mode, its tools approved). harnessrl starts this
# script in a fresh copy of the task's repository; the connection is Cline's OpenAI-compatible provider,
# configured with its own `cline auth` command:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Cline's default: its prompts and tools.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v cline >/dev/null || { echo "cline not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Each attempt starts from a fresh Cline state (~/.cline: settings, sessions), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT
# Offline: telemetry (otel.cline.bot) and the update check off, in its global settings; and its feature-flag
# poll (PostHog at data.cline.bot), whose only switch is IS_TEST=true: in 3.0.65 that variable does nothing
# else than choose a no-op flag provider (the flags keep their defaults).
mkdir -p "$HOME/.cline/data/settings"
echo '{"telemetryOptOut": true, "autoUpdateEnabled": false}' > "$HOME/.cline/data/settings/global-settings.json"
export IS_TEST=true

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

cline auth -p openai -k "$OPENAI_API_KEY" -b "$OPENAI_BASE_URL" -m "${HARNESSRL_MODEL:-policy}" </dev/null
cline "$HARNESSRL_TASK_PROMPT" </dev/null
