#!/usr/bin/env bash
# The harness command of this example: Codex CLI (npm @openai/codex, installed by scripts/clis.sh, run
# unmodified) on the task's prompt with `codex exec`. harnessrl starts this script in a fresh copy of the
# task's repository; the connection is one Codex model provider, Codex's documented form for a custom
# OpenAI-compatible endpoint (Codex speaks only the Responses API to it):
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v codex >/dev/null || { echo "codex not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Each attempt starts from a fresh Codex state (sessions, history), outside the repository. Not under /tmp:
# Codex refuses to put its sandbox helper there, and then every shell command fails.
CODEX_HOME="$(mktemp -d "$HOME/.codex-harnessrl.XXXXXX")"
export CODEX_HOME
trap 'rm -rf "$CODEX_HOME"' EXIT
# Sandbox: codex exec's default (read-only) cannot edit. harnessrl already runs each attempt in a bubblewrap
# sandbox (workspace read-write, no network but the gateway), and Codex's own bwrap sandbox cannot nest in
# it ("bwrap: setting up uid map: Operation not permitted", every shell command fails), so Codex runs with
# its sandbox off, its setting for externally sandboxed environments. With `[runner] sandbox = "none"`, set
# CODEX_SANDBOX_MODE=workspace-write in `[runner] env`.
cat > "$CODEX_HOME/config.toml" <<TOML
model = "${HARNESSRL_MODEL:-policy}"
model_provider = "harnessrl"
sandbox_mode = "${CODEX_SANDBOX_MODE:-danger-full-access}"

[model_providers.harnessrl]
name = "harnessrl"
base_url = "$OPENAI_BASE_URL"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

# offline: no analytics, no plugin marketplace sync (github.com, chatgpt.com)
[analytics]
enabled = false

[features]
plugins = false
TOML

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

codex exec "$HARNESSRL_TASK_PROMPT" </dev/null
