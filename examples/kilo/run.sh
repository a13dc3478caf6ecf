#!/usr/bin/env bash
# The harness command of this example: Kilo's CLI (npm @kilocode/cli, the `kilo` binary, installed by
# scripts/clis.sh, run unmodified) on the task's prompt with `kilo run --auto`. Kilo is built on OpenCode, and
# the connection is the same: one provider in its config, as for any OpenAI-compatible server:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Kilo's default: its agent, prompts, tools.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v kilo >/dev/null || { echo "kilo not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Offline: no update check, no model catalogue, no language-server downloads, no sharing, no telemetry.
export KILO_DISABLE_AUTOUPDATE=1 KILO_DISABLE_MODELS_FETCH=1 KILO_DISABLE_LSP_DOWNLOAD=1 KILO_DISABLE_SHARE=1
export KILO_TELEMETRY_LEVEL=off npm_config_offline=true
# Each attempt starts from a fresh Kilo state (~/.local/share/kilo, ~/.config/kilo), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

# The provider: OpenCode's documented form for an OpenAI-compatible endpoint. enabled_providers: only this one
# (without it Kilo also loads its own Kilo Gateway provider, which asks api.kilo.ai for its models).
mkdir -p "$HOME/.config/kilo"
model="${HARNESSRL_MODEL:-policy}"
cat > "$HOME/.config/kilo/kilo.json" <<JSON
{
  "provider": {
    "harnessrl": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "harnessrl",
      "options": {"baseURL": "$OPENAI_BASE_URL", "apiKey": "{env:OPENAI_API_KEY}"},
      "models": {"$model": {"name": "$model"}}
    }
  },
  "model": "harnessrl/$model",
  "enabled_providers": ["harnessrl"]
}
JSON

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --auto: its permissions are granted unasked (headless; without it the run ends at the first edit).
kilo run "$HARNESSRL_TASK_PROMPT" --auto </dev/null
