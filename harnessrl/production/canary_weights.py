"""Loading canary versions into the engines: a candidate is a LoRA adapter on the engine's base, loaded
under its own model name ``<deployment>-v<version>`` beside what serves the stable arm -- on the embedded
engine a named adapter (mixed-adapter batches, docs/policies.md), on vLLM a hot-loaded LoRA
(``/v1/load_lora_adapter``). Its weights come from an adapter folder (a checkpoint) or from the trainer
in this process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class CanaryError(ValueError):
    """A canary request that cannot be honoured (the message says why and what to do)."""


def adapter_name(deployment: str, version: int) -> str:
    """The model name a version of a deployment is served under."""
    return f"{deployment}-v{version}"


@dataclass(frozen=True)
class Weights:
    """A candidate's LoRA weights: an adapter folder (``path``; needed to serve it again after a restart),
    and/or an adapter state dict with its peft config from the trainer in this process."""

    path: str | None = None
    lora: Mapping[str, Any] | None = None
    lora_config: Any = None

    @classmethod
    def from_model(cls, model: Any, folder: str | Path | None = None, version: int | None = None) -> Weights:
        """The trainer's current adapter (``weights.publish.trainable_update``), written to ``folder`` too
        when given (``FolderPublisher`` layout ``<folder>/v<version>``) so a restarted gateway can load it."""
        from harnessrl.weights.publish import FolderPublisher, trainable_update

        update = trainable_update(model)
        if "lora" not in update:
            raise CanaryError("a canary candidate is a LoRA adapter; this model is fully fine-tuned")
        path = None
        if folder is not None:
            if version is None:
                raise CanaryError("writing a candidate to a folder needs its version")
            path = str(Path(FolderPublisher(folder).publish(model, version)).resolve())
        return cls(path, update["lora"], update["lora_config"])


class VersionLoader(Protocol):
    """Makes a version servable under a model name beside the others, and drops it again."""

    def load(self, name: str, version: int, weights: Weights) -> None: ...

    def drop(self, name: str) -> None: ...


class EmbeddedVersions:
    """The embedded engine in this process: each version is a named adapter (``register_adapters``)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def load(self, name: str, version: int, weights: Weights) -> None:
        lora = weights.lora if weights.lora is not None else weights.path
        if lora is None:
            raise CanaryError(f"version {version} has no weights to load: give an adapter folder or the "
                              "trainer's adapter")
        self.engine.update_weights(lora=lora, lora_config=weights.lora_config, version=version, adapter=name)

    def drop(self, name: str) -> None:
        self.engine.drop_adapter(name)


class LoraEngines:
    """Engines over HTTP: vLLM servers (``--enable-lora``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) or the
    embedded engine's server, which answers the same routes. Each version is a hot-loaded LoRA under its
    name, from a folder the engines can read (``version`` travels too: the embedded engine stamps it)."""

    def __init__(self, urls: list[str], timeout_s: float = 300.0) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self.timeout_s = timeout_s

    def load(self, name: str, version: int, weights: Weights) -> None:
        import httpx

        if weights.path is None:
            raise CanaryError(f"vLLM loads a candidate from a folder: version {version} has none (publish it "
                              "with a checkpoint path)")
        with httpx.Client(timeout=self.timeout_s) as client:
            for url in self.urls:
                body = {"lora_name": name, "lora_path": weights.path, "version": version}
                r = client.post(f"{url}/load_lora_adapter", json=body)
                if r.status_code == 400 and "already" in r.text.lower():  # loaded before a restart
                    continue
                if r.status_code != 200:
                    raise CanaryError(f"{url}/load_lora_adapter refused {name} ({weights.path}): HTTP "
                                      f"{r.status_code} {r.text[:300]} (is vLLM started with --enable-lora and "
                                      "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True?)")

    def drop(self, name: str) -> None:
        import httpx

        with httpx.Client(timeout=self.timeout_s) as client:
            for url in self.urls:
                r = client.post(f"{url}/unload_lora_adapter", json={"lora_name": name})
                if r.status_code != 200:
                    log.warning("%s/unload_lora_adapter %s: HTTP %d %s", url, name, r.status_code, r.text[:200])


def adapter_folder(path: str) -> str:
    """A checkpoint path as the folder holding ``adapter_config.json`` (a step folder may nest it)."""
    p = Path(path)
    if (p / "adapter_config.json").exists():
        return str(p.resolve())
    found = sorted(p.glob("**/adapter_config.json")) if p.is_dir() else []
    if not found:
        raise CanaryError(f"{path} holds no LoRA adapter (adapter_config.json): a canary candidate is a LoRA "
                          "adapter folder")
    return str(found[0].parent.resolve())
