#!/usr/bin/env bash
# The harness command of this example: Claude Code (npm @anthropic-ai/claude-code, installed by
# scripts/clis.sh, run unmodified) in print mode on the task's prompt. harnessrl starts this script in a
# fresh copy of the task's repository; only Claude Code's own standard settings connect the two:
#   ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY  the rollout's gateway route (no /v1) and key
#   HARNESSRL_TASK_PROMPT                   the task's prompt (the task input's "prompt" key)
# Nothing else is configured: Claude Code keeps its default model name (the gateway serves the policy
# under any name), system prompt, tools and output limit (the gateway grants what its cap allows).
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${ANTHROPIC_BASE_URL:?run me through harnessrl (it sets ANTHROPIC_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v claude >/dev/null || { echo "claude not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Offline: no telemetry, error reports, update checks or other non-essential traffic.
export DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
# Each attempt starts from a fresh Claude Code state (~/.claude.json, ~/.claude/), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

# The agent works in a git repository, as on a developer's machine.
if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# Print mode (-p) never asks for permission, so the tools it may use unasked are listed, as for any
# headless use of Claude Code; stdin closed so that nothing waits for a human.
claude -p "$HARNESSRL_TASK_PROMPT" --allowedTools "Read,Edit,Bash" </dev/null
