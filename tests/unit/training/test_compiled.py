"""``[training] compile``: the decoder layers compiled train exactly what eager trains, batches of every length
share the compiled graphs, and the engine's modules stay as they were (harnessrl/training/compiled.py)."""

from __future__ import annotations

import pytest
import torch

from harnessrl.training.compiled import compile_layers, decoder_layer_names
from harnessrl.training.trainer import Trainer

from ._helpers import tiny_llama
from .test_trainer import _batch, _cfg

pytestmark = pytest.mark.slow  # the first compiled step compiles (~20-40 s on 2 cores)


def _lora_params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def test_compiled_layers_train_what_eager_trains_on_batches_of_every_length() -> None:
    torch._dynamo.reset()
    batches = [_batch(tiny_llama(), n=6, seed=s) for s in range(3)]  # lengths 6-20, packed differently
    eager = Trainer(tiny_llama(), _cfg())
    compiled = Trainer(tiny_llama(), _cfg(compile=True))
    layers = [m for m in compiled.model.modules() if type(m).__name__ == "LlamaDecoderLayer"]
    assert len(layers) == 2 and all(getattr(m, "_compiled_call_impl", None) is not None for m in layers)
    graphs = []
    for batch in batches:
        a, b = eager.step(batch), compiled.step(batch)
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    pa, pb = _lora_params(eager), _lora_params(compiled)
    assert pa.keys() == pb.keys() and all(torch.allclose(pa[k], pb[k], atol=1e-5) for k in pa)
    # dynamic shapes: the first step compiled (the layer's pieces around the attention, which runs eager);
    # two batches of other lengths and packings compiled nothing more
    assert graphs[0] > 0 and graphs == [graphs[0]] * 3, graphs


def test_nothing_is_compiled_where_it_does_not_apply() -> None:
    model = tiny_llama()
    assert decoder_layer_names(model) == {"LlamaDecoderLayer"}
    assert compile_layers(model, distributed=True) == 0  # FSDP wraps the layers itself
    assert compile_layers(torch.nn.Sequential(torch.nn.Linear(2, 2))) == 0  # no decoder layer named
    assert all(getattr(m, "_compiled_call_impl", None) is None for m in model.modules())
