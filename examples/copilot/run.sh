#!/usr/bin/env bash
# The harness command of this example: GitHub Copilot CLI (npm @github/copilot, the `copilot` binary, a native
# program from its platform package, installed by scripts/clis.sh, run unmodified) on the task's prompt with
# `copilot -p` (one prompt, then it exits). The connection is Copilot's documented bring-your-own-key provider
# (`copilot help environment`), an OpenAI-compatible server over chat completions:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Copilot's default: its system prompt, tools (bash, view, edit, create, grep, ...).
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v copilot >/dev/null || { echo "copilot not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

export COPILOT_PROVIDER_BASE_URL="$OPENAI_BASE_URL" COPILOT_PROVIDER_API_KEY="$OPENAI_API_KEY"
export COPILOT_PROVIDER_TYPE=openai COPILOT_PROVIDER_WIRE_API=completions
export COPILOT_MODEL="${HARNESSRL_MODEL:-policy}"
# Its prompt budget for a model it does not know (config.toml's [runner] env): it compacts its history (a
# summary call) before reaching it. Unset, Copilot's own default applies.
if [ -n "${COPILOT_CONTEXT_WINDOW:-}" ]; then export COPILOT_PROVIDER_MAX_PROMPT_TOKENS="$COPILOT_CONTEXT_WINDOW"; fi
# Offline: no GitHub sign-in, telemetry, web tools, GitHub MCP server or self-update (it would download a
# newer CLI than the pinned one).
export COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false
# Each attempt starts from a fresh Copilot state (~/.copilot: config, sessions, logs), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --allow-all-tools: headless, nobody answers its permission prompts (shell commands, file writes);
# --no-ask-user: the model's own questions to the user are not offered (nobody would answer them).
copilot -p "$HARNESSRL_TASK_PROMPT" --allow-all-tools --no-ask-user </dev/null
