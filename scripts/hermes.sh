#!/usr/bin/env bash
# Installs Hermes Agent (PyPI hermes-agent, pinned) into its own virtual environment, ./.venv-hermes
# (gitignored), for examples/hermes and tests/e2e/clis.
#
#   bash scripts/hermes.sh                 # create or check .venv-hermes
#   HERMES_VENV=/path bash scripts/hermes.sh
#
# Why a separate venv: hermes-agent pins every dependency exactly (openai 2.24.0, pydantic 2.13.4, rich,
# httpx, fastapi, ...), which would fight harnessrl's own; a harness is a subprocess, so it need not share
# harnessrl's interpreter. hermes-agent needs Python 3.11-3.13: $PYTHON, else pyenv's 3.11/3.12/3.13 found in
# `pyenv root`, else python3.11/3.12/3.13 on PATH that actually run. Idempotent: a pins file in the venv; a
# second run with the same pins only checks. From the package registry only (~230 MB, a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HERMES_VENV:-.venv-hermes}"
HERMES_VERSION=0.19.0
PINS="hermes-agent==$HERMES_VERSION"
say() { echo "hermes.sh: $*" >&2; }

runs() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' >/dev/null 2>&1; }

find_python() {
  if [ -n "${PYTHON:-}" ]; then runs "$PYTHON" && { echo "$PYTHON"; return; }; say "PYTHON=$PYTHON is not a Python 3.11-3.13"; return 1; fi
  local root candidate
  if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
    for candidate in "$root"/versions/3.11.*/bin/python3.11 "$root"/versions/3.12.*/bin/python3.12 \
                     "$root"/versions/3.13.*/bin/python3.13; do
      runs "$candidate" && { echo "$candidate"; return; }
    done
  fi
  for candidate in python3.11 python3.12 python3.13 python3; do
    runs "$(command -v "$candidate" 2>/dev/null)" && { command -v "$candidate"; return; }
  done
  return 1
}

if [ -f "$VENV/pins" ] && [ "$(cat "$VENV/pins")" = "$PINS" ] && [ -x "$VENV/bin/hermes" ]; then
  say "$VENV already has $PINS"
else
  if [ ! -x "$VENV/bin/python" ]; then
    PY="$(find_python)" || {
      say "no Python 3.11-3.13 found (hermes-agent $HERMES_VERSION requires >=3.11,<3.14). Install one, e.g."
      say "  pyenv install 3.11, or your system's python3.11 with its venv module (python3.11-venv)"
      say "then rerun, or point PYTHON at it: PYTHON=/path/to/python3.11 bash scripts/hermes.sh"
      exit 1
    }
    say "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
  fi
  say "installing $PINS into $VENV"
  start=$(date +%s)
  # (pip's "Location ... is ignored" notes about this machine's local indexes are filtered out.)
  "$VENV/bin/python" -m pip install --quiet $PINS 2> >(grep -v "is ignored: it is neither" >&2)
  echo "$PINS" > "$VENV/pins"
  say "installed in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1)"
fi
# The base interpreter the venv's python links to, as a link inside the venv: a sandboxed attempt binds
# it read-only by naming this path in [runner] sandbox_read_only (the sandbox resolves links).
ln -sfn "$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')" "$VENV/base-python"
"$VENV/bin/python" -c "import importlib.metadata as m, sys; print('python', sys.version.split()[0], 'hermes-agent', m.version('hermes-agent'))"
