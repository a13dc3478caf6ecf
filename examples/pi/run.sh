#!/usr/bin/env bash
# The harness command of this example: Pi's coding agent (npm @mariozechner/pi-coding-agent, the `pi` binary,
# installed by scripts/clis.sh, run unmodified) on the task's prompt with `pi -p` (print mode: one prompt, its
# tools run unasked, since Pi has no permission prompts, and it exits). The connection is one custom provider in
# Pi's models.json, Pi's documented form for an OpenAI-compatible server (Ollama, vLLM, proxies):
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Pi's default: its system prompt, tools (read, bash, edit, write), chat completions API.
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v pi >/dev/null || { echo "pi not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Offline: no version check or install telemetry (pi.dev), no package update check, no fd/ripgrep download
# from GitHub (its optional grep/find tools fetch them when missing from PATH).
export PI_OFFLINE=1
# Each attempt starts from a fresh Pi state (~/.pi/agent: settings, sessions), outside the repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

# The provider: "apiKey" names the variable Pi reads the key from (Pi's value resolution), not the key.
mkdir -p "$HOME/.pi/agent"
model="${HARNESSRL_MODEL:-policy}"
cat > "$HOME/.pi/agent/models.json" <<JSON
{
  "providers": {
    "harnessrl": {
      "baseUrl": "$OPENAI_BASE_URL",
      "api": "openai-completions",
      "apiKey": "OPENAI_API_KEY",
      "models": [{"id": "$model"}]
    }
  }
}
JSON

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

pi -p "$HARNESSRL_TASK_PROMPT" --provider harnessrl --model "$model" </dev/null
