"""A tiny random Llama-style causal LM with a real (byte-level BPE) tokenizer, built offline in ~1 s.

Unit tests across the project (engine, trainer, gateway rendering) need a model that behaves like the real
one structurally: a ChatML chat template with tool support, special tokens, an EOS that ends generation,
and a tokenizer that round-trips any text exactly. Weights are random (seeded), so outputs are gibberish.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harnessrl.models.cache import build_once, models_dir

#: Bumped when the tokenizer corpus, template or default config changes, so cached folders are rebuilt.
TINY_VERSION = 1

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: ChatML (like SmolLM2) plus Hermes-style tools: tools are listed in the system turn, and an assistant's
#: tool calls are rendered as <tool_call>{"name": ..., "arguments": ...}</tool_call> lines.
CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'] }}"
    "{%- else -%}{{ 'You are a helpful assistant.' }}{%- endif -%}"
    "{{ '\\n\\n# Tools\\n\\n<tools>' }}"
    "{%- for tool in tools -%}{{ '\\n' }}{{ tool | tojson }}{%- endfor -%}"
    '{{ \'\\n</tools>\\n\\nCall a tool with <tool_call>{\\"name\\": <name>, \\"arguments\\": <json>}</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0]['role'] == 'system' -%}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if message['content'] -%}{{ message['content'] }}{%- endif -%}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{%- set fn = call['function'] if call.get('function') else call -%}"
    "{{ '<tool_call>{\\\"name\\\": ' + (fn['name'] | tojson) + ', \\\"arguments\\\": ' }}"
    "{%- if fn['arguments'] is string -%}{{ fn['arguments'] }}{%- else -%}{{ fn['arguments'] | tojson }}{%- endif -%}"
    "{{ '}</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

_CORPUS_WORDS = (
    "the quick brown fox jumps over the lazy dog what is the capital of France Paris Berlin London "
    "hello world assistant user system tool call function name arguments answer question please thank you "
    "def return import print if else for while true false none json bash ls cat echo 0 1 2 3 4 5 6 7 8 9 "
    "+ - * / = ( ) [ ] { } : ; , . ! ? ' \" < > _ \n \t a b c d e f g h i j k l m n o p q r s t u v w x y z"
).split(" ")


def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer (any UTF-8 text round-trips exactly) with ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [" ".join(_CORPUS_WORDS[i:] + _CORPUS_WORDS[:i]) for i in range(0, len(_CORPUS_WORDS), 7)]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(
    *,
    seed: int = 0,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_position_embeddings: int = 512,
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: a seeded random ``LlamaForCausalLM`` in fp32, eval mode."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=eos,
        pad_token_id=eos,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=eos, pad_token_id=eos
    )
    model.eval()
    return model, tokenizer


def prepare_tiny_model(**kwargs: Any) -> Path:
    """Save :func:`tiny_model` to the cache once and return the folder (spec ``"tiny"``)."""
    key = json.dumps({"v": TINY_VERSION, **kwargs}, sort_keys=True)
    final = models_dir() / f"tiny-{hashlib.sha256(key.encode()).hexdigest()[:10]}"

    def build(tmp: Path) -> dict:
        model, tokenizer = tiny_model(**kwargs)
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        return {"kind": "tiny", "config": json.loads(key)}

    return build_once(final, build, what="tiny random model")
