"""``[engine] on_update``: each way is refused where it would be ignored, and 'keep' sizes vLLM's adapter slots."""

from __future__ import annotations

import pytest
from run_config import write_run_config

from harnessrl.config import ConfigError, load_config


@pytest.mark.parametrize(("engine", "training", "needle"), [
    ({"kind": "vllm", "on_update": "continue"}, {}, "needs the embedded engine"),
    ({"kind": "embedded", "on_update": "keep"}, {}, "needs vLLM and LoRA"),
    ({"kind": "vllm", "on_update": "keep"}, {"lora": False}, "needs vLLM and LoRA"),
    ({"kind": "vllm", "on_update": "keep", "vllm": {"max_loras": 1}}, {}, "max_loras = 1 is below 2"),
])
def test_on_update_refused_where_it_would_be_ignored(tmp_path, engine, training, needle) -> None:
    path = write_run_config(tmp_path, {"engine": engine, "training": training})
    with pytest.raises(ConfigError, match=needle):
        load_config(path)


def test_keep_serves_two_adapters_per_trained_policy(tmp_path) -> None:
    one = write_run_config(tmp_path / "one", {"engine": {"kind": "vllm", "on_update": "keep"}})
    assert load_config(one).engine.vllm.max_loras == 2
    two = write_run_config(tmp_path / "two", {"engine": {"kind": "vllm", "on_update": "keep"},
                                              "policies": {"a": {}, "b": {}, "judge": {"frozen": True}}})
    assert load_config(two).engine.vllm.max_loras == 4
    assert load_config(write_run_config(tmp_path / "d", {})).engine.on_update == "drain"
    cont = write_run_config(tmp_path / "c", {"engine": {"kind": "embedded", "on_update": "continue"}})
    assert load_config(cont).engine.on_update == "continue"
