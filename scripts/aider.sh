#!/usr/bin/env bash
# Installs aider (PyPI aider-chat, pinned) into its own virtual environment, ./.venv-aider (gitignored), for
# examples/aider and tests/e2e/clis.
#
#   bash scripts/aider.sh                # create or check .venv-aider
#   AIDER_VENV=/path bash scripts/aider.sh
#
# Why a separate venv: aider-chat pins every dependency exactly (litellm, openai, numpy 1.26, pydantic, ...),
# which would fight harnessrl's own; a harness is a subprocess, so it need not share harnessrl's
# interpreter. aider needs Python 3.10-3.12: $PYTHON, else pyenv's 3.12/3.11/3.10 found in `pyenv root`
# (the pythonX.Y shims answer "command not found" for a version that is not pyenv's global one), else
# python3.12/3.11/3.10 on PATH that actually run. Idempotent: a pins file in the venv; a second run with the
# same pins only checks. From the package registry only (see docs/harnesses.md for its time and size).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AIDER_VENV:-.venv-aider}"
AIDER_VERSION=0.86.2
PINS="aider-chat==$AIDER_VERSION"
say() { echo "aider.sh: $*" >&2; }

runs() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] < (3, 13))' >/dev/null 2>&1; }

find_python() {
  if [ -n "${PYTHON:-}" ]; then runs "$PYTHON" && { echo "$PYTHON"; return; }; say "PYTHON=$PYTHON is not a Python 3.10-3.12"; return 1; fi
  local root candidate
  if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
    for candidate in "$root"/versions/3.12.*/bin/python3.12 "$root"/versions/3.11.*/bin/python3.11 \
                     "$root"/versions/3.10.*/bin/python3.10; do
      runs "$candidate" && { echo "$candidate"; return; }
    done
  fi
  for candidate in python3.12 python3.11 python3.10 python3; do
    runs "$(command -v "$candidate" 2>/dev/null)" && { command -v "$candidate"; return; }
  done
  return 1
}

if [ -f "$VENV/pins" ] && [ "$(cat "$VENV/pins")" = "$PINS" ] && [ -x "$VENV/bin/aider" ]; then
  say "$VENV already has $PINS"
else
  if [ ! -x "$VENV/bin/python" ]; then
    PY="$(find_python)" || {
      say "no Python 3.10-3.12 found (aider-chat $AIDER_VERSION requires >=3.10,<3.13). Install one, e.g."
      say "  pyenv install 3.12, or your system's python3.12 with its venv module (python3.12-venv)"
      say "then rerun, or point PYTHON at it: PYTHON=/path/to/python3.12 bash scripts/aider.sh"
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
"$VENV/bin/python" -c "import importlib.metadata as m, sys; print('python', sys.version.split()[0], 'aider-chat', m.version('aider-chat'))"
