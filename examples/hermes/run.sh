#!/usr/bin/env bash
# The harness command of this example: Hermes Agent (PyPI hermes-agent, the `hermes` program, installed by
# scripts/hermes.sh into .venv-hermes, run unmodified) on the task's prompt in one-shot mode (`hermes -z`: one
# prompt, its tools' approvals bypassed, the final answer on stdout). The connection is Hermes' documented
# custom endpoint, `provider: custom` in ~/.hermes/config.yaml (it reads no OPENAI_BASE_URL):
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
#   HERMES_CONTEXT_WINDOW             the engine's context window (else 65536, the least Hermes runs with)
# Everything else is Hermes' default: its system prompt, toolsets (terminal, files, browser, memory, ...).
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
venv="${HERMES_VENV:-$here/../../.venv-hermes}"
[ -x "$venv/bin/hermes" ] || { echo "no hermes at $venv: run scripts/hermes.sh (or set HERMES_VENV)" >&2; exit 127; }

# Each attempt starts from a fresh Hermes state (~/.hermes: config, memories, skills, sessions), outside the
# repository.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT
# api_key: a custom endpoint's key comes from this file, not from OPENAI_API_KEY. context_length: Hermes
# refuses a model under 64k, and asks the server otherwise. Offline, nothing installed from PyPI at run time:
# lsp install_strategy manual (auto pip-installs a Python language server after the first .py edit) and
# security allow_lazy_installs false (it pip-installs edge-tts for its text_to_speech tool at start).
mkdir -p "$HOME/.hermes"
cat > "$HOME/.hermes/config.yaml" <<YAML
model:
  provider: custom
  base_url: "$OPENAI_BASE_URL"
  api_key: "$OPENAI_API_KEY"
  default: "${HARNESSRL_MODEL:-policy}"
  context_length: ${HERMES_CONTEXT_WINDOW:-65536}
lsp:
  install_strategy: manual
security:
  allow_lazy_installs: false
YAML

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

"$venv/bin/hermes" -z "$HARNESSRL_TASK_PROMPT" </dev/null
