#!/usr/bin/env bash
# The harness command of this example: Google's Gemini CLI (npm @google/gemini-cli, installed by
# scripts/clis.sh, run unmodified) on the task's prompt in headless mode (`gemini -p`). harnessrl starts this
# script in a fresh copy of the task's repository; the connection is Gemini's own settings, which harnessrl
# sets for every attempt:
#   GOOGLE_GEMINI_BASE_URL / GEMINI_API_KEY  the rollout's root (the CLI appends /v1beta/models/...) and key
#   HARNESSRL_TASK_PROMPT                    the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                          the served model name, if the controller set one (any name works)
# Everything else is the CLI's default: its prompts, tools (read_file, replace, run_shell_command, ...).
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${GOOGLE_GEMINI_BASE_URL:?run me through harnessrl (it sets GOOGLE_GEMINI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v gemini >/dev/null || { echo "gemini not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Each attempt starts from a fresh Gemini state (~/.gemini), outside the repository. Headless mode needs the
# auth type chosen in the settings file (an API key: the rollout's); usage statistics, telemetry and the
# update check are off (docs/harnesses.md).
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT
mkdir -p "$HOME/.gemini"
cat > "$HOME/.gemini/settings.json" <<JSON
{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
}
JSON

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --yolo: its tools run unasked (headless, nobody answers a prompt); --skip-trust: the fresh copy of the
# repository is a folder it has never seen (else it refuses to start); -m: without it, the CLI first asks a
# small model which model to route the turn to (a JSON side call), then the one it picked.
gemini -p "$HARNESSRL_TASK_PROMPT" --yolo --skip-trust -m "${HARNESSRL_MODEL:-gemini-2.5-pro}" </dev/null
