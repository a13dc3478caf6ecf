#!/usr/bin/env bash
# The GPU check (issue 35 item 4): a thin wrapper around benchmarks/device_check.py that finds a Python and
# its packages on a machine where nothing is installed for harnessrl. All arguments pass through:
#
#   bash benchmarks/device_check.sh --dry-run --out /tmp/dc   # anywhere, no CUDA: checks paths and arguments
#   bash benchmarks/device_check.sh --stage                   # with network: .device/ (wheels, model parts)
#   bash benchmarks/device_check.sh [--out DIR]               # on the GPU machine ($OUT by default)
#
# Python: $PYTHON, else ./.venv/bin/python (a checkout where scripts/install.sh ran), else python3 (the GPU
# image's, with CUDA torch). harnessrl is imported from this checkout (PYTHONPATH), never installed. Wheels
# in .device/wheels (carried to the GPU machine) are installed, when that Python lacks them, into /tmp/harnessrl-site without network,
# except in a dry run, which only reads.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x .venv/bin/python ]]; then
  PY=.venv/bin/python
elif command -v python3 >/dev/null; then
  PY="$(command -v python3)"
else
  echo "device_check: no Python found: set PYTHON=/path/to/python (3.11+, with torch)" >&2
  exit 2
fi

run=1  # a dry run only reads; staging runs where the wheels are not for this Python
for arg in "$@"; do [[ "$arg" == "--dry-run" || "$arg" == "--stage" ]] && run=0; done

SITE=/tmp/harnessrl-site
if [[ $run == 1 ]] && compgen -G ".device/wheels/*.whl" >/dev/null \
    && ! "$PY" -c "import pydantic, starlette, uvicorn, orjson, gguf, openai" 2>/dev/null; then
  echo "device_check: installing $(ls .device/wheels/*.whl | wc -l) carried wheels into $SITE (no network)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .device/wheels/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  export HARNESSRL_DEVICE_SITE="$SITE"  # the tools example's agents get it too (they inherit no PYTHONPATH)
fi

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
exec "$PY" benchmarks/device_check.py "$@"
