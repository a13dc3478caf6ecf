"""The judge's HTTP client: one chat completion from an OpenAI-compatible endpoint (vLLM, OpenAI, the
run's own engine), over httpx. Retries belong to the judge (``judge.py``), which also retries answers it
cannot parse; this client only says what went wrong in words a user can act on.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from harnessrl.rewards.config import JudgeConfig


class JudgeRequestError(Exception):
    """The judge endpoint did not answer (unreachable, HTTP error, no text in the answer)."""


class JudgeSetupError(ValueError):
    """The judge cannot be used as configured (missing key variable, no model to name)."""


def api_key(env: str | None) -> str | None:
    """The key from the named environment variable; it is never logged or stored."""
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise JudgeSetupError(f"[rewards.judge] api_key_env = {env!r}, but that environment variable is not set")
    return value


def check_judge(config: JudgeConfig, timeout_s: float = 5.0) -> None:
    """Before a run: the key variable is set and something answers at the endpoint (``JudgeSetupError``)."""
    key = api_key(config.api_key_env)
    url = config.url.rstrip("/") + "/models"
    try:
        httpx.get(url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise JudgeSetupError(f"[rewards.judge] endpoint {config.url} unreachable ({type(exc).__name__}: {exc}); "
                              "start the judge model or fix [rewards.judge] url") from None


class JudgeClient:
    def __init__(self, base_url: str, *, key: str | None, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s)

    async def first_model(self) -> str:
        """The first model the endpoint lists (``GET /models``): the judge's model when none is configured."""
        try:
            r = await self._http.get("/models")
            r.raise_for_status()
            return str(r.json()["data"][0]["id"])
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise JudgeSetupError(f"[rewards.judge] model is not set and {self.base_url}/models did not name "
                                  f"one ({type(exc).__name__}: {exc}); set [rewards.judge] model") from None

    async def reachable(self) -> None:
        """Raise ``JudgeSetupError`` when nothing answers at the endpoint (any HTTP answer will do)."""
        try:
            await self._http.get("/models")
        except httpx.HTTPError as exc:
            raise JudgeSetupError(f"[rewards.judge] endpoint {self.base_url} unreachable ({type(exc).__name__}: "
                                  f"{exc}); start the judge model or fix [rewards.judge] url") from None

    async def complete(self, body: dict[str, Any]) -> tuple[str, str]:
        """``(answer text, model that answered)`` of one ``/chat/completions`` request."""
        try:
            r = await self._http.post("/chat/completions", json=body)
        except httpx.TimeoutException:
            raise JudgeRequestError(f"judge endpoint {self.base_url} did not answer within "
                                    f"{self._http.timeout.read}s ([rewards.judge] timeout_s)") from None
        except httpx.HTTPError as exc:
            raise JudgeRequestError(f"judge endpoint {self.base_url} unreachable: {type(exc).__name__}: {exc}") from None
        if r.status_code != 200:
            raise JudgeRequestError(f"judge endpoint answered HTTP {r.status_code}: {r.text[:300]}")
        try:
            data = r.json()
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise JudgeRequestError(f"judge endpoint's answer has no message text: {r.text[:300]}") from None
        if not isinstance(text, str):
            raise JudgeRequestError("judge endpoint's answer has no message text (content is null)")
        return text, str(data.get("model") or body.get("model") or "")

    async def aclose(self) -> None:
        await self._http.aclose()
