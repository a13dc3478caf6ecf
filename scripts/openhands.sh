#!/usr/bin/env bash
# Installs the OpenHands SDK and its tools (PyPI openhands-sdk + openhands-tools, pinned) into their own
# virtual environment, ./.venv-openhands (gitignored), for examples/openhands and tests/e2e/clis.
#
#   bash scripts/openhands.sh                  # create or check .venv-openhands
#   OPENHANDS_VENV=/path bash scripts/openhands.sh
#
# Why a separate venv: OpenHands needs Python >= 3.12 and harnessrl runs on 3.11; a harness is a
# subprocess, so it need not share harnessrl's interpreter. The interpreter: $PYTHON, else pyenv's 3.12/3.13
# (found in `pyenv root`/versions: the `python3.12` shim answers "command not found" while pyenv's global
# version is 3.11), else python3.12/python3.13 on PATH that actually run. Idempotent: a pins file in the
# venv; a second run with the same pins only checks. From the package registry only (~60 s, ~660 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${OPENHANDS_VENV:-.venv-openhands}"
OPENHANDS_VERSION=1.58.2
PINS="openhands-sdk==$OPENHANDS_VERSION openhands-tools==$OPENHANDS_VERSION"
say() { echo "openhands.sh: $*" >&2; }

runs() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(not (3, 12) <= sys.version_info[:2] < (3, 14))' >/dev/null 2>&1; }

find_python() {
  if [ -n "${PYTHON:-}" ]; then runs "$PYTHON" && { echo "$PYTHON"; return; }; say "PYTHON=$PYTHON is not a Python 3.12 or 3.13"; return 1; fi
  local root candidate
  if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
    for candidate in "$root"/versions/3.12.*/bin/python3.12 "$root"/versions/3.13.*/bin/python3.13; do
      runs "$candidate" && { echo "$candidate"; return; }
    done
  fi
  for candidate in python3.12 python3.13; do
    runs "$(command -v "$candidate" 2>/dev/null)" && { command -v "$candidate"; return; }
  done
  return 1
}

if [ -f "$VENV/pins" ] && [ "$(cat "$VENV/pins")" = "$PINS" ] && [ -x "$VENV/bin/python" ]; then
  say "$VENV already has $PINS"
else
  if [ ! -x "$VENV/bin/python" ]; then
    PY="$(find_python)" || {
      say "no Python 3.12 or 3.13 found (OpenHands requires >= 3.12; tested with 3.12). Install one, e.g."
      say "  pyenv install 3.12, or your system's python3.12 with its venv module (python3.12-venv)"
      say "then rerun, or point PYTHON at it: PYTHON=/path/to/python3.12 bash scripts/openhands.sh"
      exit 1
    }
    say "creating $VENV with $PY"
    "$PY" -m venv "$VENV"
  fi
  say "installing $PINS into $VENV (about a minute)"
  start=$(date +%s)
  # (pip's "Location ... is ignored" notes about this machine's local indexes are filtered out.)
  "$VENV/bin/python" -m pip install --quiet $PINS 2> >(grep -v "is ignored: it is neither" >&2)
  echo "$PINS" > "$VENV/pins"
  say "installed in $(( $(date +%s) - start )) s"
fi
# The base interpreter the venv's python links to, as a link inside the venv: a sandboxed attempt binds
# it read-only by naming this path in [runner] sandbox_read_only (the sandbox resolves links).
ln -sfn "$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')" "$VENV/base-python"
"$VENV/bin/python" -c "import importlib.metadata as m, sys; print('python', sys.version.split()[0], *(p + ' ' + m.version(p) for p in ('openhands-sdk', 'openhands-tools')))"
