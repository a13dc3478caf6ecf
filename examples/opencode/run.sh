#!/usr/bin/env bash
# The harness command of this example: OpenCode (npm opencode-ai, installed by scripts/clis.sh, run
# unmodified) on the task's prompt with `opencode run`. harnessrl starts this script in a fresh copy of
# the task's repository; the connection is one OpenCode provider, as for any OpenAI-compatible server:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# The provider package (@ai-sdk/openai-compatible) is bundled in OpenCode's binary: nothing is installed
# at run time. Everything else is OpenCode's default: its agent ("build"), prompts, tools, permissions.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v opencode >/dev/null || { echo "opencode not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Offline: no update check, no models.dev catalogue, no language-server downloads, no sharing; and npm
# offline, for the plugin API OpenCode installs into its config folder in the background at each start
# (without it, that install reaches the npm registry; offline it fails quietly and nothing changes).
export OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1
export OPENCODE_DISABLE_SHARE=1 npm_config_offline=true
# Each attempt starts from a fresh OpenCode state (~/.local/share/opencode, ~/.config), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

# The provider: OpenCode's documented form for an OpenAI-compatible endpoint, in the user's config.
mkdir -p "$HOME/.config/opencode"
model="${HARNESSRL_MODEL:-policy}"
cat > "$HOME/.config/opencode/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "harnessrl": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "harnessrl",
      "options": {"baseURL": "$OPENAI_BASE_URL", "apiKey": "{env:OPENAI_API_KEY}"},
      "models": {"$model": {"name": "$model"}}
    }
  },
  "model": "harnessrl/$model"
}
JSON

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

opencode run "$HARNESSRL_TASK_PROMPT" </dev/null
