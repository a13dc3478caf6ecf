#!/usr/bin/env bash
# Installs the production coding CLIs that tests/e2e/clis drives through the gateway, at pinned versions,
# into ./.clis (gitignored, ~2.2 GB), from the npm registry only. Idempotent: a second run with the same pins
# only checks. Why npm and not the vendors' install scripts: those download binaries from elsewhere;
# every CLI here ships its native binary as an optional npm platform package, so npm is enough.
# node/npm: the machine's, or Debian's when npm is missing. Tested with node 20.20: Claude Code's package
# asks for node >= 22, but node only runs its install script, which puts the native binary in place.
# Install scripts run (no --ignore-scripts): they copy binaries out of the platform packages, nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
OPENCODE_VERSION=1.18.33
GEMINI_CLI_VERSION=0.61.0  # Google's Gemini API only (the gateway's /v1beta routes); node >= 20
QWEN_CODE_VERSION=0.24.4   # asks for node >= 22; runs on node 20.20 (tests/e2e/clis/test_qwen_code.py)
CLINE_VERSION=3.0.65
KILO_VERSION=7.7.7         # @kilocode/cli, the `kilo` binary (an optional platform package, like OpenCode's)
CONTINUE_VERSION=1.5.47    # @continuedev/cli, the `cn` binary
PI_VERSION=0.73.1          # @mariozechner/pi-coding-agent, the `pi` binary (a Node program); node >= 20.6
COPILOT_VERSION=1.0.102    # @github/copilot, the `copilot` binary (a native optional platform package, ~200 MB)
# The provider package OpenCode's config names; its binary bundles a copy (nothing is fetched at run
# time), this one is the pinned reference for the config's "npm" field.
OPENAI_COMPATIBLE_VERSION=3.0.92
PINS="@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION opencode-ai@$OPENCODE_VERSION @ai-sdk/openai-compatible@$OPENAI_COMPATIBLE_VERSION @google/gemini-cli@$GEMINI_CLI_VERSION"
PINS="$PINS @qwen-code/qwen-code@$QWEN_CODE_VERSION cline@$CLINE_VERSION @kilocode/cli@$KILO_VERSION @continuedev/cli@$CONTINUE_VERSION"
PINS="$PINS @mariozechner/pi-coding-agent@$PI_VERSION @github/copilot@$COPILOT_VERSION"
BINS="claude codex opencode gemini qwen cline kilo cn pi copilot"

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "clis.sh: npm is missing; install Debian's nodejs and npm (apt-get install -y nodejs npm)" >&2
    exit 1
  fi
fi

mkdir -p .clis
installed() { for bin in $BINS; do [ -x ".clis/node_modules/.bin/$bin" ] || return 1; done; }
if [ -f .clis/pins ] && [ "$(cat .clis/pins)" = "$PINS" ] && installed; then
  echo "clis installed (.clis): $PINS"
  exit 0
fi
[ -f .clis/package.json ] || echo '{"name": "harnessrl-clis", "private": true}' > .clis/package.json
# --include=optional: the native binaries are optional platform packages. A throwaway cache: npm's own
# (~/.npm) would keep a second ~800 MB copy of what .clis holds, on a CI disk that vLLM's stage needs.
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
npm install --prefix .clis --save-exact --no-audit --no-fund --loglevel=error --include=optional \
  --engine-strict=false --cache "$cache" $PINS
for bin in $BINS; do
  [ -x ".clis/node_modules/.bin/$bin" ] || { echo "clis.sh: $bin did not install" >&2; exit 1; }
done
echo "$PINS" > .clis/pins
echo "clis installed (.clis): $PINS"
