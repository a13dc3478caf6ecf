#!/usr/bin/env bash
# The harness command of this example: Qwen Code (npm @qwen-code/qwen-code, installed by scripts/clis.sh,
# run unmodified) on the task's prompt in headless mode (`qwen "$PROMPT"`). harnessrl starts this script in a
# fresh copy of the task's repository; the connection is Qwen Code's documented OpenAI settings, which
# harnessrl sets for every attempt:
#   OPENAI_BASE_URL / OPENAI_API_KEY  the rollout's gateway route (…/v1) and key
#   HARNESSRL_TASK_PROMPT             the task's prompt (the task input's "prompt" key)
#   HARNESSRL_MODEL                   the served model name, if the controller set one (any name works)
# Everything else is Qwen Code's default: its prompts and tools (read_file, edit, run_shell_command, ...).
set -euo pipefail

: "${HARNESSRL_TASK_PROMPT:?the task input needs a \"prompt\" key}"
: "${OPENAI_BASE_URL:?run me through harnessrl (it sets OPENAI_BASE_URL to the rollout route)}"
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${CLIS_BIN:-$here/../../.clis/node_modules/.bin}:$PATH"
command -v qwen >/dev/null || { echo "qwen not found: run scripts/clis.sh (or set CLIS_BIN)" >&2; exit 127; }

# Each attempt starts from a fresh Qwen Code state (~/.qwen), outside the repository; usage statistics,
# telemetry and the update check are off (docs/harnesses.md).
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT
mkdir -p "$HOME/.qwen"
cat > "$HOME/.qwen/settings.json" <<JSON
{
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
}
JSON
export OPENAI_MODEL="${HARNESSRL_MODEL:-${OPENAI_MODEL:-qwen3-coder-plus}}" QWEN_CODE_SUPPRESS_YOLO_WARNING=1

if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.name=harnessrl -c user.email=harnessrl@localhost commit -qm task
fi

# --auth-type openai: the OpenAI-compatible provider (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL);
# --yolo: its tools run unasked (headless, nobody answers; without it the edit tool is declined).
qwen "$HARNESSRL_TASK_PROMPT" --auth-type openai --yolo </dev/null
