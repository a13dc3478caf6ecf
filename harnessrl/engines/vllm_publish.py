"""Publishing trained weights to vLLM engines: LoRA hot-load, or a restart on a saved full model.

The controller pauses the gateway (new requests wait, in-flight ones drain) around ``Trainer.publish``,
so a publisher may swap what the engines serve without any request seeing half an update. After the
swap it tells the gateway (``POST /admin/policy_version`` with ``engine_model``) which upstream model
name now serves the policy, so every later call goes to the new adapter and is stamped with the new
version.

- LoRA (``VllmLoraPublisher``): write the peft adapter folder, ``POST /v1/load_lora_adapter`` on every
  engine as ``policy-v<N>`` (vLLM started with ``--enable-lora`` and
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``), switch the gateway to that name, unload the previous one.
  Seconds, no restart; the folder must be readable by the engines (same machine or shared storage).
- Full weights in place (``VllmInPlacePublisher``, the default): write a safetensors model folder and have
  every engine load it into the running model: vLLM's own ``reload_weights`` worker method, called through
  its ``POST /collective_rpc`` (servers started with ``VLLM_SERVER_DEV_MODE=1``), then
  ``POST /reset_prefix_cache`` (cached KV was computed with the old weights). About a second for
  SmolLM2-135M on a CPU; launched and attached servers alike; the folder must be readable by the engines.
  The same seam takes a transfer without the disk later: vLLM's weight-transfer routes
  (``/init_weight_transfer_engine``, ``/update_weights``: NCCL broadcast from trainer rank 0, or CUDA IPC
  handles on one machine) replace the file write and the ``reload_weights`` call; see docs/vllm.md.
- Full weights by restart (``VllmReloadPublisher``, ``full_weights = "restart"``): write the folder and
  restart the launched servers on it (about a minute for a small model on a CPU).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import torch

from harnessrl.engines.vllm import VllmEngine, VllmError
from harnessrl.weights.publish import FolderPublisher

log = logging.getLogger(__name__)


class GatewayLink:
    """The admin API of the gateway a publisher switches (URL and admin token)."""

    def __init__(self, url: str, admin_token: str, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.admin_token = admin_token
        self.timeout_s = timeout_s

    def switch(self, version: int, engine_model: str | None, policy: str | None = None) -> None:
        """Route later calls to ``engine_model`` (None: keep) and stamp them with ``version``; ``policy``:
        only that policy's calls (several policies, docs/policies.md)."""
        body: dict[str, Any] = {"version": version}
        if policy is not None:
            body["policy"] = policy
        if engine_model is not None:
            body["engine_model"] = engine_model
        r = httpx.post(f"{self.url}/admin/policy_version", json=body, timeout=self.timeout_s,
                       headers={"Authorization": f"Bearer {self.admin_token}"})
        if r.status_code != 200:
            raise VllmError(f"the gateway refused the switch to {engine_model!r} v{version}: "
                            f"HTTP {r.status_code} {r.text[:500]}")

    def in_flight_models(self) -> dict[str, int]:
        """Calls in flight per upstream model name (adapters still serving calls)."""
        r = httpx.get(f"{self.url}/admin/status", timeout=self.timeout_s,
                      headers={"Authorization": f"Bearer {self.admin_token}"})
        r.raise_for_status()
        return dict(r.json().get("in_flight_models") or {})


class _GatewayAware:
    gateway: GatewayLink | None = None

    def attach_gateway(self, url: str, admin_token: str) -> None:
        """Set the gateway to switch after each publish (the stack starts it after the trainer)."""
        self.gateway = GatewayLink(url, admin_token)

    policy: str | None = None

    def _switch(self, version: int, engine_model: str | None) -> None:
        if self.gateway is None:
            log.warning("published policy v%d but no gateway is attached: calls keep going to the old "
                        "model name until the gateway's engine_model is changed", version)
            return
        self.gateway.switch(version, engine_model, self.policy)


class VllmLoraPublisher(_GatewayAware):
    """Saves the LoRA adapter and hot-loads it on every engine as ``<prefix><version>``.

    ``policy`` (several policies): the adapter is ``<policy>-v<version>`` and the gateway switches only that
    policy's calls to it, so each policy's adapter is loaded, served and replaced on its own.

    ``keep_old`` (``[engine] on_update = "keep"``; the gateway is not paused): the previous adapter keeps
    serving the calls that were sent to it and is unloaded once the gateway reports none in flight (checked
    at each publish and by a background thread, every ``retire_poll_s``).
    """

    def __init__(self, folder: FolderPublisher, urls: list[str], *, name_prefix: str = "policy-v",
                 gateway: GatewayLink | None = None, timeout_s: float = 300.0, policy: str | None = None,
                 keep_old: bool = False, retire_poll_s: float = 0.25) -> None:
        self.keep_old = keep_old
        self.retire_poll_s = retire_poll_s
        self.retiring: list[str] = []  # adapters replaced but maybe still serving calls (keep_old)
        self._retire_lock = threading.Lock()
        self._retirer: threading.Thread | None = None
        self.policy = policy
        if policy is not None and name_prefix == "policy-v":
            name_prefix = f"{policy}-v"
        self.folder = folder
        self.urls = [u.rstrip("/") for u in urls]
        self.name_prefix = name_prefix
        self.gateway = gateway
        self.timeout_s = timeout_s
        self.current: str | None = None  # adapter the gateway routes to now

    def publish(self, model: torch.nn.Module, version: int) -> str:
        if not hasattr(model, "peft_config"):
            raise VllmError("VllmLoraPublisher publishes LoRA adapters; this model has none (full fine-tuning "
                            "publishes with VllmInPlacePublisher or VllmReloadPublisher)")
        path = str(Path(self.folder.publish(model, version)).resolve())
        name = f"{self.name_prefix}{version}"
        with httpx.Client(timeout=self.timeout_s) as client:
            for url in self.urls:
                self._load(client, url, name, path)
            self._switch(version, name)
            old, self.current = self.current, name
            if old is not None and old != name:
                if self.keep_old and self.gateway is not None:
                    with self._retire_lock:
                        self.retiring.append(old)
                    self.retire()
                else:
                    for url in self.urls:
                        self._unload(client, url, old)
        log.info("policy v%d served as LoRA %s on %d engine(s)", version, name, len(self.urls))
        return path

    def retire(self) -> list[str]:
        """Unload the replaced adapters no call is using any more; the rest are retried in the background.
        Returns the adapters still kept."""
        assert self.gateway is not None
        with self._retire_lock:
            if not self.retiring:
                return []
            try:
                busy = self.gateway.in_flight_models()
            except httpx.HTTPError as exc:
                log.warning("could not ask the gateway which adapters are in use (%s); retrying", exc)
                busy = {name: 1 for name in self.retiring}
            done = [name for name in self.retiring if not busy.get(name)]
            if done:
                with httpx.Client(timeout=self.timeout_s) as client:
                    for name in done:
                        for url in self.urls:
                            self._unload(client, url, name)
            self.retiring = [name for name in self.retiring if name not in done]
            if self.retiring and (self._retirer is None or not self._retirer.is_alive()):
                self._retirer = threading.Thread(target=self._retire_loop, name="lora-retire", daemon=True)
                self._retirer.start()
            return list(self.retiring)

    def _retire_loop(self) -> None:
        while self.retiring:
            time.sleep(self.retire_poll_s)
            try:
                self.retire()
            except Exception:  # noqa: BLE001 - keep trying; a failed unload is logged by _unload
                log.exception("retiring replaced LoRA adapters failed")

    def _load(self, client: httpx.Client, url: str, name: str, path: str) -> None:
        body = {"lora_name": name, "lora_path": path}
        r = client.post(f"{url}/load_lora_adapter", json=body)
        if r.status_code == 400 and "already" in r.text.lower():
            # Re-publishing a version (a resumed run): replace the adapter under the same name.
            self._unload(client, url, name)
            r = client.post(f"{url}/load_lora_adapter", json=body)
        if r.status_code != 200:
            hint = (" (is vLLM started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True? is the "
                    "adapter's rank <= --max-lora-rank and its folder readable by the engine?)")
            raise VllmError(f"{url}/load_lora_adapter failed for {name} ({path}): HTTP {r.status_code} "
                            f"{r.text[:500]}{hint}")

    def _unload(self, client: httpx.Client, url: str, name: str) -> None:
        r = client.post(f"{url}/unload_lora_adapter", json={"lora_name": name})
        if r.status_code != 200:
            log.warning("%s/unload_lora_adapter %s: HTTP %d %s", url, name, r.status_code, r.text[:200])


class VllmInPlacePublisher(_GatewayAware):
    """Saves the full model and loads it into every running engine in place (full fine-tuning, no restart)."""

    def __init__(self, folder: FolderPublisher, urls: list[str], *, gateway: GatewayLink | None = None,
                 timeout_s: float = 600.0, check: bool = True) -> None:
        self.folder = folder
        self.roots = [u.rstrip("/").removesuffix("/v1") for u in urls]
        self.gateway = gateway
        self.timeout_s = timeout_s
        if check:
            self.check()

    def check(self) -> None:
        """Refuse at start, not at the first publish, an engine without the routes an in-place update needs."""
        for root in self.roots:
            try:
                r = httpx.get(f"{root}/is_paused", timeout=30)
            except httpx.HTTPError as exc:
                raise VllmError(f"{root}: cannot reach the engine to check its in-place update routes: {exc}") \
                    from exc
            if r.status_code != 200:
                raise VllmError(
                    f"{root} cannot load full weights in place (GET /is_paused: HTTP {r.status_code}): start "
                    "that vLLM server with VLLM_SERVER_DEV_MODE=1 (its /collective_rpc and /reset_prefix_cache "
                    "routes; keep it on a private network), or train LoRA (training.lora), or, for servers "
                    "harnessrl launched, set [engine.vllm] full_weights = \"restart\"")

    def publish(self, model: torch.nn.Module, version: int) -> str:
        if hasattr(model, "peft_config"):
            raise VllmError("VllmInPlacePublisher publishes full weights; a LoRA model publishes with "
                            "VllmLoraPublisher")
        path = str(Path(self.folder.publish(model, version)).resolve())
        with httpx.Client(timeout=self.timeout_s) as client:
            for root in self.roots:
                self._reload(client, root, path)
        self._switch(version, None)  # same served name, new weights
        log.info("policy v%d loaded in place on %d engine(s) from %s", version, len(self.roots), path)
        return path

    @staticmethod
    def _reload(client: httpx.Client, root: str, path: str) -> None:
        # collective_rpc passes string kwargs only; reload_weights reads the folder's safetensors (checkpoint
        # format) into the running model on every worker of that server.
        r = client.post(f"{root}/collective_rpc",
                        json={"method": "reload_weights", "kwargs": {"weights_path": path}})
        if r.status_code != 200:
            raise VllmError(f"{root}/collective_rpc reload_weights from {path} failed: HTTP {r.status_code} "
                            f"{r.text[:500]} (is the folder readable by that engine, at the same path?)")
        r = client.post(f"{root}/reset_prefix_cache")
        if r.status_code != 200 or r.json().get("success") is False:
            raise VllmError(f"{root}/reset_prefix_cache failed after loading {path}: HTTP {r.status_code} "
                            f"{r.text[:300]}: its cached KV still holds the old weights' values")


class VllmReloadPublisher(_GatewayAware):
    """Saves the full model and restarts the launched vLLM servers on it (full fine-tuning)."""

    def __init__(self, folder: FolderPublisher, engine: VllmEngine, *, gateway: GatewayLink | None = None) -> None:
        if not engine.launched:
            raise VllmError("full-weight publishing restarts the vLLM servers harnessrl launched; with attached "
                            "servers (engine.urls) train a LoRA adapter (training.lora) instead")
        self.folder = folder
        self.engine = engine
        self.gateway = gateway

    def publish(self, model: torch.nn.Module, version: int) -> str:
        path = str(Path(self.folder.publish(model, version)).resolve())
        seconds = self.engine.restart(path)
        self._switch(version, self.engine.served_name)
        log.info("policy v%d: vLLM restarted on %s in %.0f s", version, path, seconds)
        return path
