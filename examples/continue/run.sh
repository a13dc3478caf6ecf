#!/usr/bin/env bash
# The harness command of this example: Continue's CLI (npm @continuedev/cli, the `cn` binary, installed by
# scripts/clis.sh, run unmodified) on the task's prompt in headless mode (`cn -p --auto`). harnessrl starts
# this script in a fresh copy of the task's repository; the connection is one model in Continue's config
# file (provider `openai`, `apiBase`), its documented form for an OpenAI-compatible server:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Continue's default: its prompts and tools.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v cn >/dev/null || { echo "cn not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Each attempt starts from a fresh Continue state (~/.continue: sessions, logs), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

mkdir -p "$HOME/.continue"
model="${HARNESSRL_MODEL:-policy}"
cat > "$HOME/.continue/config.yaml" <<YAML
name: harnessrl
version: 1.0.0
schema: v1
models:
  - name: $model
    provider: openai
    model: $model
    apiBase: $OPENAI_BASE_URL
    apiKey: $OPENAI_API_KEY
    roles: [chat, edit, apply]
YAML

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --config: the file above (else cn asks to log in to Continue's hub); --auto: its write and shell tools are
# offered and run unasked (headless, they are left out otherwise).
cn -p "$HARNESSRL_TASK_PROMPT" --config "$HOME/.continue/config.yaml" --auto </dev/null
