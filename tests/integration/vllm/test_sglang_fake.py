"""The SGLang attach probe against a fake that answers like SGLang's server (``tests/fakes/fake_sglang.py``).

Not a real SGLang: the fake reproduces the shapes of SGLang's source (model cards, flat errors, ids only
when ``return_token_ids`` is asked for and known), which is what the probe reads. No test here has run
against a real SGLang server.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ -> `fakes` importable

from fakes.fake_sglang import start_fake_sglang  # noqa: E402

from harnessrl.engines.config import EngineConfig  # noqa: E402
from harnessrl.engines.sglang import SglangNotSupported, check_sglang  # noqa: E402


def _config(url: str) -> EngineConfig:
    return EngineConfig(kind="sglang", urls=[url])


def test_the_fake_answers_like_sglang() -> None:
    server, _ = start_fake_sglang(model_path="/models/qwen", served_model_name="qwen")
    try:
        root = server.url.removesuffix("/v1")
        health = httpx.get(f"{root}/health")
        assert health.status_code == 200 and health.content == b""
        assert httpx.get(f"{root}/get_model_info").json()["model_path"] == "/models/qwen"
        card = httpx.get(f"{server.url}/models").json()["data"][0]
        assert (card["id"], card["owned_by"], card["root"]) == ("qwen", "sglang", "qwen")
        plain = httpx.post(f"{server.url}/completions", json={"prompt": [5, 6], "max_tokens": 2}).json()
        assert "token_ids" not in plain["choices"][0] and plain["metadata"] == {"weight_version": "default"}
        bad = httpx.post(f"{server.url}/completions", json={"prompt": [5], "max_tokens": 0})
        assert bad.status_code == 400 and bad.json()["object"] == "error" and "error" not in bad.json()
        swap = httpx.post(f"{root}/update_weights_from_disk", json={"model_path": "/ckpt", "weight_version": "v1"})
        assert swap.json()["success"] is True and "v1" in swap.json()["message"]
    finally:
        server.stop()


def test_probe_accepts_an_sglang_that_returns_token_ids() -> None:
    server, app = start_fake_sglang(served_model_name="qwen")
    try:
        check_sglang(_config(server.url), "gateway", train=False)
        posts = [body for method, path, body in app.requests if (method, path) == ("POST", "/v1/completions")]
        assert len(posts) == 1
        assert posts[0]["model"] == "qwen"  # the served name /v1/models reported
        assert posts[0]["prompt"] == [1, 2, 3] and posts[0]["return_token_ids"] is True
    finally:
        server.stop()


def test_probe_refuses_an_sglang_release_that_ignores_return_token_ids() -> None:
    server, _ = start_fake_sglang(token_ids=False)  # answers 200, without the ids
    try:
        with pytest.raises(SglangNotSupported, match=r"HTTP 200; missing \['prompt_token_ids', 'token_ids'\]"):
            check_sglang(_config(server.url), "gateway", train=False)
    finally:
        server.stop()


def test_probe_says_when_sglang_cannot_be_reached() -> None:
    with pytest.raises(SglangNotSupported, match="cannot reach"):
        check_sglang(_config("http://127.0.0.1:9/v1"), "gateway", train=False)
