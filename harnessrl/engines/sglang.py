"""SGLang engines, attach mode: what works, checked against the running servers at start.

SGLang's OpenAI server returns token ids when asked with ``return_token_ids: true`` (recent releases):
on ``/v1/completions`` each choice carries ``prompt_token_ids`` and ``token_ids`` (streamed too), the
prompt may be a list of token ids, and ``logprobs`` has OpenAI's completions shape. That is exactly what
the gateway's token-exact mode (``render_mode = "gateway"``) sends and reads, so collection through
SGLang works there. Its ``/v1/chat/completions`` returns ids only without streaming, so
``render_mode = "engine"`` is refused. Its native ``/generate`` (``input_ids``, ``return_logprob``,
``meta_info.output_token_logprobs``) is not used: it is a different dialect.

Not supported yet (``SglangNotSupported`` says so): publishing trained weights. SGLang has the
endpoints (``/load_lora_adapter``, ``/unload_lora_adapter``, ``/update_weights_from_disk``) but a
publisher for them is not written or tested; train with vLLM or the embedded engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from harnessrl.engines.config import EngineConfig

MISSING_FOR_TRAINING = (
    "weight publishing to SGLang: a publisher calling POST /load_lora_adapter + /unload_lora_adapter "
    "(LoRA) or POST /update_weights_from_disk (full weights), and routing the gateway to the adapter"
)


class SglangNotSupported(RuntimeError):
    """The requested SGLang setup needs something harnessrl does not support yet (listed in the message)."""


def check_sglang(engine: EngineConfig, render_mode: str, *, train: bool, probe: bool = True,
                 timeout_s: float = 30.0) -> None:
    """Refuse SGLang setups that cannot work, and probe each server for token ids on /v1/completions.

    ``render_mode`` is the gateway's (``[gateway] render_mode``): SGLang serves only token-exact rendering."""
    missing: list[str] = []
    if not engine.urls:
        missing.append("launching SGLang servers (attach only: list them in engine.urls)")
    if train:
        missing.append(MISSING_FOR_TRAINING)
    if render_mode != "gateway":
        missing.append("render_mode 'engine' (SGLang returns chat token ids only without streaming): set "
                       "gateway.render_mode = \"gateway\" so the gateway sends token ids to /v1/completions")
    if missing:
        raise SglangNotSupported("engine.kind = \"sglang\" is not supported yet for this setup; missing: "
                                 + "; ".join(missing) + ". Use engine.kind = \"vllm\" (docs/vllm.md).")
    if probe:
        for url in engine.urls:
            probe_token_ids(url.rstrip("/"), timeout_s)


def probe_token_ids(base_url: str, timeout_s: float = 30.0) -> None:
    """One 1-token completion from token ids; raises ``SglangNotSupported`` if ids do not come back."""
    with httpx.Client(timeout=timeout_s) as client:
        try:
            models = client.get(f"{base_url}/models").json().get("data") or []
            body = {"model": models[0]["id"] if models else "default", "prompt": [1, 2, 3], "max_tokens": 1,
                    "temperature": 0, "return_token_ids": True, "logprobs": 0}
            r = client.post(f"{base_url}/completions", json=body)
        except (httpx.HTTPError, ValueError) as exc:
            raise SglangNotSupported(f"cannot reach SGLang at {base_url}: {type(exc).__name__}: {exc}") from exc
    choice = (r.json().get("choices") or [{}])[0] if r.status_code == 200 else {}
    lacking = [k for k in ("prompt_token_ids", "token_ids") if not choice.get(k)]
    if r.status_code != 200 or lacking:
        raise SglangNotSupported(
            f"SGLang at {base_url} did not return token ids for a token-id prompt on /v1/completions "
            f"(HTTP {r.status_code}; missing {lacking or 'a 200 answer'}): use an SGLang release whose OpenAI "
            "server accepts return_token_ids, or vLLM")
